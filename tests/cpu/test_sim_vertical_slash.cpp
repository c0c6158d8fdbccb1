// The simulator's vertical-slash model (kernels/attention/patterns/vertical_slash/vertical_slash_pattern_model.h): kept
// keys and coverage by hand, the rule, budget and floor levels at their boundaries, the
// fit recovering the values that made its observations, and simulated runs of the
// pattern (records as the trainer writes them, the trainer's first plan, the analytic
// profile's pairs).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "common/errors.h"
#include "harness/config/manifest.h"
#include "harness/latency/analytic_profile.h"
#include "harness/patterns/vertical_slash/vertical_slash_pattern_fit.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_work.h"
#include "kernels/attention/ring/ring_work.h"
#include "harness/sim/run_simulator.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_pattern_model.h"
#include "harness/train/trainer.h"
#include "kernels/attention/core/packed_sequences.h"
#include "kernels/attention/ring/cp_sharding.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"
#include "tests/support/measured_run_folder.h"
#include "tests/support/first_plan_check.h"
#include "tests/support/small_simulation.h"
#include "tests/support/run_command.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_pattern.h"
#include "kernels/attention/patterns/moba/moba_ring_work.h"
#include "harness/patterns/vertical_slash/vertical_slash_simulation.h"

namespace sb {
namespace {

using nlohmann::json;

VerticalSlashPatternRule top_k_rule(int64_t rule_keys, int64_t forced, int64_t most, int64_t last_queries,
                                    double spread = 0.0) {
  VerticalSlashPatternRule r;
  r.top_p = false;
  r.rule_keys = rule_keys;
  r.forced_keys = forced;
  r.most_keys = most;
  r.last_queries = last_queries;
  r.spread = spread;
  return r;
}

// H(x)(s), linear between integers, summed term by term.
double harmonic(double x, double s) {
  double h = 0;
  const auto whole = static_cast<int64_t>(std::floor(x));
  for (int64_t j = 1; j <= whole; ++j) h += std::pow(static_cast<double>(j), -s);
  return h + (x - static_cast<double>(whole)) * std::pow(static_cast<double>(whole + 1), -s);
}

// The shape's keys of query i, written out from the rule in the header.
double query_keys_by_rule(int64_t L, int64_t F, double u, double e, int64_t i) {
  const auto n = static_cast<double>(i + 1);
  if (n <= static_cast<double>(F)) return n;
  return static_cast<double>(F) + std::min(n - static_cast<double>(F), e * ((1 - u) + u * n / static_cast<double>(L)));
}

TEST(VerticalSlashShape, KeptKeysByHandAndAgainstTheSumOverQueries) {
  // F 1, u 0, level 1: the queries keep 1, 2, 2, 2.
  EXPECT_DOUBLE_EQ((VerticalSlashShape{1, 0.0}.kept_keys(4, 1.0)), 7.0 / 4.0);
  // u 1, level 2: 1, 1 + min(1, 2 x 2/4), 1 + min(2, 2 x 3/4), 1 + min(3, 2).
  EXPECT_DOUBLE_EQ((VerticalSlashShape{1, 1.0}.kept_keys(4, 2.0)), (1.0 + 2.0 + 2.5 + 3.0) / 4.0);
  EXPECT_DOUBLE_EQ((VerticalSlashShape{1, 0.3}.kept_keys(4, 3.0)), 2.5);  // the full level: dense causal
  EXPECT_DOUBLE_EQ((VerticalSlashShape{10, 0.5}.kept_keys(4, 0.0)), 2.5);  // all forced
  for (int64_t L : {1, 7, 130, 1000, 4097}) {
    for (int64_t F : {1, 40, 130}) {
      for (double u : {0.0, 0.25, 1.0}) {
        const VerticalSlashShape shape{F, u};
        for (double e : {0.0, 0.5, 17.0, 333.3, 5000.0}) {
          double sum = 0;
          for (int64_t i = 0; i < L; ++i) {
            EXPECT_DOUBLE_EQ(shape.query_keys(L, i, e), query_keys_by_rule(L, F, u, e, i));
            sum += query_keys_by_rule(L, F, u, e, i);
          }
          EXPECT_NEAR(shape.kept_keys(L, e), sum / static_cast<double>(L), 1e-9 * (1 + sum))
              << "L " << L << " F " << F << " u " << u << " e " << e;
          if (e <= shape.full_level(L) && shape.kept_keys(L, e) > shape.kept_keys(L, 0)) {
            EXPECT_NEAR(shape.kept_keys(L, shape.level_for_kept_keys(L, shape.kept_keys(L, e))), shape.kept_keys(L, e),
                        1e-6);
          }
        }
        EXPECT_DOUBLE_EQ(shape.kept_keys(L, shape.full_level(L)), (static_cast<double>(L) + 1) / 2);
      }
    }
  }
}

TEST(VerticalSlashPatternModel, CoverageByHand) {
  // Uniform (s = 0), the last 2 of 4 queries keep 2 keys each (F 1, level 1): 2/3 and 2/4.
  const VerticalSlashPatternModel uniform(0.0, top_k_rule(2, 1, 4, 2));
  EXPECT_NEAR(uniform.coverage(4, 1.0), (2.0 / 3.0 + 2.0 / 4.0) / 2.0, 1e-15);
  const VerticalSlashPatternModel zipf(1.0, top_k_rule(2, 1, 4, 2));
  EXPECT_NEAR(zipf.coverage(4, 1.0), (1.5 / (11.0 / 6.0) + 1.5 / (25.0 / 12.0)) / 2.0, 1e-15);
  EXPECT_DOUBLE_EQ(zipf.coverage(4, 3.0), 1.0);
  EXPECT_DOUBLE_EQ(zipf.coverage(1, 0.0), 1.0);
  // Spread 1, level 2: query 2 keeps 2.5 keys, H linear between 2 and 3.
  const VerticalSlashPatternModel spread(1.0, top_k_rule(2, 1, 4, 2, 1.0));
  EXPECT_NEAR(spread.coverage(4, 2.0), ((1.5 + 0.5 / 3.0) / (11.0 / 6.0) + (11.0 / 6.0) / (25.0 / 12.0)) / 2.0, 1e-15);
}

TEST(VerticalSlashPatternModel, RuleBudgetAndFloorLevelsAreTheirRulesBoundaries) {
  const int64_t L = 900;
  const double s = 0.8;
  for (double u : {0.0, 0.7}) {
    VerticalSlashPatternRule top_p = top_k_rule(1, 20, 600, 16, u);
    top_p.top_p = true;
    top_p.p = 0.7;
    const VerticalSlashPatternModel model(s, top_p);
    const VerticalSlashShape& shape = model.shape();
    const auto coverage = [&](double e) {
      double sum = 0;
      for (int64_t i = L - 16; i < L; ++i) sum += harmonic(query_keys_by_rule(L, 20, u, e, i), s) / harmonic(i + 1, s);
      return sum / 16.0;
    };
    const double most = 600 - 20;
    EXPECT_DOUBLE_EQ(model.most_level(L), most);
    const double reference = model.reference_level(L);
    EXPECT_GE(coverage(reference), 0.7 - 1e-12);
    EXPECT_LT(coverage(reference - 1e-6), 0.7);
    EXPECT_NEAR(model.coverage(L, reference), coverage(reference), 1e-12);
    // A budget: the largest level whose kept keys fit, within [0, most].
    for (double budget : {5.0, 25.0, 57.5, 300.0, 10000.0}) {
      const double e = model.budget_level(L, budget);
      EXPECT_GE(e, 0.0);
      EXPECT_LE(e, most);
      if (e > 0 && e < most) {
        EXPECT_LE(shape.kept_keys(L, e), budget + 1e-9) << budget;
        EXPECT_GT(shape.kept_keys(L, e + 1e-6), budget) << budget;
      }
    }
    EXPECT_EQ(model.budget_level(L, 5.0), 0.0) << "below the forced keys' mean";
    EXPECT_EQ(model.budget_level(L, 10000.0), most);
    // The floor: the smallest level reaching 0.9 of the reference's coverage.
    const double floor = model.floor_level(L, 0.9, reference);
    EXPECT_GE(coverage(floor), 0.9 * coverage(reference) - 1e-12);
    EXPECT_LT(coverage(floor - 1e-6), 0.9 * coverage(reference));
    EXPECT_LT(floor, reference);

    // sequence(): no budget runs the rule (its floor recorded, as the backend does); a
    // budget below the floor runs the floor; above it the budget's level (which may exceed
    // the rule's).
    const VerticalSlashSequenceModel rule = model.sequence(L, 0, 0.9);
    EXPECT_DOUBLE_EQ(rule.level, reference);
    EXPECT_DOUBLE_EQ(rule.kept_keys, rule.reference_kept_keys);
    EXPECT_DOUBLE_EQ(rule.floor_kept_keys, shape.kept_keys(L, floor));
    EXPECT_EQ(model.sequence(L, 0, 0.0).floor_kept_keys, 0.0) << "no floor request";
    const VerticalSlashSequenceModel low = model.sequence(L, 10, 0.9);
    EXPECT_DOUBLE_EQ(low.level, floor);
    EXPECT_DOUBLE_EQ(low.floor_kept_keys, shape.kept_keys(L, floor));
    const VerticalSlashSequenceModel high = model.sequence(L, 400, 0.9);
    EXPECT_DOUBLE_EQ(high.level, model.budget_level(L, 400));
    EXPECT_GT(high.level, reference);
    EXPECT_LE(high.kept_keys, 400.0 + 1e-9);
    EXPECT_NEAR(high.coverage, coverage(high.level), 1e-12);
  }

  // top_k: the rule's keys less the forced ones, within [0, most] and the length.
  const VerticalSlashPatternModel k(0.8, top_k_rule(160, 40, 300, 64));
  EXPECT_DOUBLE_EQ(k.reference_level(1000), 120.0);
  EXPECT_DOUBLE_EQ(k.reference_level(100), 60.0);
  EXPECT_DOUBLE_EQ(k.reference_level(30), 0.0);
  EXPECT_DOUBLE_EQ(VerticalSlashPatternModel(0.8, top_k_rule(20, 40, 300, 64)).reference_level(1000), 0.0);
  EXPECT_DOUBLE_EQ(VerticalSlashPatternModel(0.8, top_k_rule(900, 40, 300, 64)).reference_level(1000), 260.0);
  EXPECT_THROW(VerticalSlashPatternModel(-1.0, top_k_rule(1, 1, 1, 1)), std::invalid_argument);
  EXPECT_THROW(VerticalSlashPatternModel(1.0, top_k_rule(1, 5, 4, 1)), std::invalid_argument);
  EXPECT_THROW(VerticalSlashPatternModel(1.0, top_k_rule(1, 1, 4, 1, 1.5)), std::invalid_argument);
}

TEST(VerticalSlashPatternModel, DefaultTopKRuleFromTheMethodsCounts) {
  VerticalSlashParams p;
  p.budget = VerticalSlashBudget::kTopK;
  p.sink_tokens = 8;
  p.local_window = 32;
  p.vertical_count = 64;
  p.slash_count = 8;
  p.block_size = 16;
  p.max_verticals = 100;
  p.max_slashes = 50;
  const VerticalSlashPatternRule r = vertical_slash_pattern_rule(p);
  EXPECT_FALSE(r.top_p);
  EXPECT_EQ(r.rule_keys, 8 + 32 + 64 + 8 * 16);
  EXPECT_EQ(r.forced_keys, 40);
  EXPECT_EQ(r.most_keys, 100 + 50 * 16);
  EXPECT_EQ(r.spread, 0.0);
  EXPECT_EQ(vertical_slash_pattern_rule(p, 77, 0.5).rule_keys, 77);
  EXPECT_EQ(vertical_slash_pattern_rule(p, 77, 0.5).spread, 0.5);
}

// Records of runs whose coverage and rule kept keys the model made, two sequences per
// micro-batch, layers that differ.
std::vector<IterationRecord> modelled_records(const VerticalSlashPatternModel& truth) {
  std::vector<IterationRecord> records;
  for (int64_t it = 0; it < 3; ++it) {
    IterationRecord r;
    r.iteration = it;
    r.warmup = it == 0;
    r.microbatch_lengths = {{700, 200}, {1500}};
    r.microbatch_tokens = {900, 1500};
    for (const auto& lengths : r.microbatch_lengths) {
      std::vector<double> kept, reference;
      for (int64_t length : lengths) {
        const VerticalSlashSequenceModel seq = truth.sequence(length, 0, 0);
        kept.push_back(seq.kept_keys);
        reference.push_back(seq.reference_kept_keys);
      }
      r.sequence_budgets.push_back(kept);
      r.sequence_reference_budgets.push_back(reference);
      // Layer l keeps (l + 1) / 2 of the keys, so layers' coverage differs.
      std::vector<double> layer_kept, layer_coverage;
      for (int64_t l = 0; l < 2; ++l) {
        VerticalSlashCoverageObservation o{lengths, {}, 0};
        double mean = 0;
        for (double k : kept) {
          o.kept_keys.push_back(k * (static_cast<double>(l) + 1) / 2);
          mean += o.kept_keys.back() / static_cast<double>(kept.size());
        }
        layer_kept.push_back(mean);
        layer_coverage.push_back(modelled_vertical_slash_coverage(truth, o));
      }
      r.layer_budgets.push_back(layer_kept);
      r.layer_coverage.push_back(layer_coverage);
    }
    records.push_back(r);
  }
  return records;
}

TEST(VerticalSlashPatternFit, RecoversTheExponentAndTheRulesKeysOfTheSamePatternsRuns) {
  const VerticalSlashPatternRule rule = top_k_rule(90, 10, 4000, 64);
  const VerticalSlashPatternModel truth(0.6, rule);
  const std::filesystem::path dir = test::fresh_temp_dir("vs_pattern_fit");
  const json attention{{"name", "vertical_slash"}, {"budget", "top_k"}, {"block_size", 16}};
  json other = attention;
  other["block_size"] = 32;
  json same_but_prior = attention;
  same_but_prior["expected_keys"] = 7;
  const auto manifest = [](const json& a) {
    return json{{"methods", json::array({{{"name", "x"}, {"attention", a}}})}};
  };
  VerticalSlashParams pattern;
  pattern.budget = VerticalSlashBudget::kTopK;
  pattern.block_size = 16;
  test::write_measured_run_folder(dir / "measured", false, modelled_records(truth), manifest(same_but_prior));
  test::write_measured_run_folder(dir / "other_pattern", false, modelled_records(truth), manifest(other));
  test::write_measured_run_folder(dir / "simulated", true, modelled_records(truth), manifest(attention));
  VerticalSlashPatternRule start = rule;
  start.rule_keys = 1;  // replaced by the fit
  const VerticalSlashPatternFit fit =
      fit_vertical_slash_pattern_from_results(dir, pattern, start, "m.json", "$.simulation.coverage.fit_from");
  EXPECT_NEAR(fit.exponent, 0.6, 2e-3);
  EXPECT_LT(fit.coverage_rmse, 1e-3);
  EXPECT_EQ(fit.coverage_points, 2 * 2 * 2);  // 2 measured iterations x 2 micro-batches x 2 layers
  EXPECT_EQ(fit.rule_keys, 90);
  EXPECT_LT(fit.rule_rmse, 1e-9);
  EXPECT_EQ(fit.rule_points, 2 * 3);
  EXPECT_FALSE(fit.spread_fitted) << "no context-parallel run";
  EXPECT_EQ(fit.runs, (std::vector<std::string>{(dir / "measured").string()}));
  try {
    VerticalSlashParams unseen = pattern;
    unseen.p = 0.5;
    fit_vertical_slash_pattern_from_results(dir, unseen, start, "m.json", "$.simulation.coverage.fit_from");
    FAIL() << "no run has this pattern";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.json_path(), "$.simulation.coverage.fit_from");
  }
  // Runs of the pattern whose records lack the rule's kept keys: the error names them.
  const std::filesystem::path old_records = test::fresh_temp_dir("vs_pattern_fit_old");
  std::vector<IterationRecord> records = modelled_records(truth);
  for (IterationRecord& r : records) r.sequence_reference_budgets.clear();
  test::write_measured_run_folder(old_records / "measured", false, records, manifest(attention));
  try {
    fit_vertical_slash_pattern_from_results(old_records, pattern, start, "m.json", "$.simulation.coverage.fit_from");
    FAIL() << "no rule observations";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("sequence_reference_budgets"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(old_records);
  std::filesystem::remove_all(dir);
}

TEST(VerticalSlashPatternFit, ScalesEachSequencesKeptKeysByItsLayersShare) {
  // One micro-batch of two sequences keeping 100 and 50 keys per query over the layers
  // (mean 75), its two layers 60 and 90 on average: layer 0 keeps 0.8 of each sequence's,
  // layer 1 1.2.
  IterationRecord r;
  r.iteration = 1;
  r.microbatch_lengths = {{400, 300}};
  r.microbatch_tokens = {700};
  r.sequence_budgets = {{100, 50}};
  r.sequence_reference_budgets = {{110, 55}};
  r.layer_budgets = {{60, 90}};
  r.layer_coverage = {{0.5, 0.7}};
  const std::filesystem::path dir = test::fresh_temp_dir("vs_pattern_observations");
  test::write_measured_run_folder(dir, false, {r});
  const VerticalSlashObservations o = vertical_slash_observations(dir);
  ASSERT_EQ(o.coverage.size(), 2u);
  EXPECT_EQ(o.coverage[0].kept_keys, (std::vector<double>{80, 40}));
  EXPECT_EQ(o.coverage[1].kept_keys, (std::vector<double>{120, 60}));
  EXPECT_EQ(o.coverage[1].coverage, 0.7);
  ASSERT_EQ(o.rule.size(), 2u);
  EXPECT_EQ(o.rule[1].length, 300);
  EXPECT_EQ(o.rule[1].kept_keys, 55);
  EXPECT_TRUE(o.work.empty()) << "no context parallelism";
  std::filesystem::remove_all(dir);
}

TEST(VerticalSlashPatternFit, TopPRecoversTheExponentFromTheRulesKeptKeysAndTheSpreadFromTheRingsWork) {
  VerticalSlashPatternRule rule = top_k_rule(1, 10, 4000, 64, 0.6);
  rule.top_p = true;
  rule.p = 0.8;
  const VerticalSlashPatternModel truth(0.9, rule);
  VerticalSlashObservations o;
  for (const IterationRecord& r : modelled_records(truth)) {
    if (r.warmup) continue;
    for (size_t k = 0; k < r.microbatch_lengths.size(); ++k) {
      for (size_t s = 0; s < r.microbatch_lengths[k].size(); ++s) {
        o.rule.push_back({r.microbatch_lengths[k][s], r.sequence_reference_budgets[k][s]});
      }
      VerticalSlashCoverageObservation c{r.microbatch_lengths[k], r.sequence_budgets[k], 0};
      c.coverage = modelled_vertical_slash_coverage(truth, c);
      o.coverage.push_back(c);
      for (const CpLayout& layout : {CpLayout{CpLayoutKind::kContiguous, 0}, CpLayout{CpLayoutKind::kZigzag, 0}}) {
        VerticalSlashWorkObservation w;
        w.lengths = r.microbatch_lengths[k];
        for (double kept : r.sequence_budgets[k]) w.kept_keys.push_back(std::llround(kept));
        w.cp = 2;
        w.layout = layout;
        w.sink = 4;
        w.window = 6;
        w.measured_share = modelled_vertical_slash_work_share(w, 0.6);
        o.work.push_back(w);
      }
    }
  }
  VerticalSlashPatternRule start = rule;
  start.spread = 0;  // replaced by the fit
  const VerticalSlashPatternFit fit = fit_vertical_slash_pattern(o, start);
  EXPECT_TRUE(fit.spread_fitted);
  EXPECT_NEAR(fit.spread, 0.6, 2e-3);
  EXPECT_EQ(fit.spread_points, 2 * 2 * 2);
  EXPECT_NEAR(fit.exponent, 0.9, 2e-3);
  EXPECT_LT(fit.rule_rmse, 1e-3);
  EXPECT_EQ(fit.rule_keys, 0) << "top_p has no keys to fit";
  EXPECT_THROW(fit_vertical_slash_pattern(VerticalSlashObservations{}, start), std::invalid_argument);
}

// qwen2-test, one stage, two DP ranks, vertical-slash scaled to 16..200-token samples.
// preset: "baseline", "sab", "sab+dst" or "lbb+dst" (the presets' batching and budget; the
// presets themselves would set MoBA attention).
json vertical_slash_manifest(const std::string& preset) {
  json j = test::small_simulation_manifest_json();
  j["parallelism"] = {{"dp", 2}, {"pp", 1}};
  j["data"] = {{"synthetic", {{"length_mixture", json::array({{{"weight", 0.5}, {"min_tokens", 16}, {"max_tokens", 60}},
                                                              {{"weight", 0.5}, {"min_tokens", 120}, {"max_tokens", 200}}})}}}};
  j["train"]["max_tokens_per_microbatch"] = 256;
  j["train"]["global_batch_size"] = 8;
  j["method_defaults"] = {{"attention",
                           {{"name", "vertical_slash"}, {"budget", "top_k"}, {"vertical_count", 4}, {"slash_count", 2},
                            {"sink_tokens", 2}, {"local_window", 4}, {"block_size", 4}, {"last_queries", 8},
                            {"expected_keys", 12}}},
                          {"dst", {{"p", 0.1}}}};
  j["simulation"]["coverage"] = {{"exponent", 0.7}, {"rule_keys", 20}};
  const std::string batching = preset.rfind("sab", 0) == 0 ? "sab" : preset.rfind("lbb", 0) == 0 ? "lbb" : "sequential";
  const std::string budget = preset.find("dst") != std::string::npos ? "dst" : "fixed";
  j["methods"] = json::array({{{"name", "x"}, {"batching", batching}, {"budget", budget}}});
  return j;
}

TEST(RunSimulator, VerticalSlashRecordsWhatTheTrainerRecords) {
  for (const char* preset : {"baseline", "sab+dst"}) {
    const json j = vertical_slash_manifest(preset);
    RunSimulator sim = test::simulator_of(j);
    const auto* simulation = dynamic_cast<const VerticalSlashSimulation*>(&sim.attention());
    ASSERT_NE(simulation, nullptr);
    const VerticalSlashPatternModel& model = simulation->model();
    EXPECT_EQ(model.rule().rule_keys, 20);
    const int64_t layers = qwen2_preset("qwen2-test").num_hidden_layers;
    for (int64_t it = 0; it < 3; ++it) {
      const SimulatedIteration x = sim.simulate_iteration(it);
      const IterationRecord& r = x.record;
      ASSERT_EQ(r.sequence_budgets.size(), r.microbatch_lengths.size()) << preset;
      ASSERT_EQ(r.layer_reference_budgets.size(), r.microbatch_lengths.size());
      size_t k = 0;
      for (const auto& rank : x.plan.ranks) {
        for (const PlannedMicroBatch& mb : rank) {
          const std::vector<int64_t>& lengths = r.microbatch_lengths[k];
          double kept = 0, reference = 0, coverage = 0;
          double floor = 0;
          for (size_t i = 0; i < lengths.size(); ++i) {
            const int64_t budget = mb.sequence_budgets.empty() ? mb.budget : mb.sequence_budgets[i];
            const VerticalSlashSequenceModel seq = model.sequence(lengths[i], budget, mb.coverage_floor_ratio);
            // Whole kept keys per query, as vertical_slash_kept_keys_per_query reports them.
            EXPECT_EQ(r.sequence_budgets[k][i], static_cast<double>(std::llround(seq.kept_keys)));
            EXPECT_EQ(r.sequence_reference_budgets[k][i], static_cast<double>(std::llround(seq.reference_kept_keys)));
            kept += r.sequence_budgets[k][i];
            reference += r.sequence_reference_budgets[k][i];
            coverage += seq.coverage;
            floor += seq.floor_kept_keys;
            if (mb.coverage_floor_ratio > 0) EXPECT_GT(seq.floor_kept_keys, 0.0) << "every sequence's floor";
            if (std::string(preset) == "baseline") {
              EXPECT_EQ(budget, 0) << "the rule runs without a budget";
              EXPECT_DOUBLE_EQ(seq.kept_keys, seq.reference_kept_keys);
            }
          }
          const auto n = static_cast<double>(lengths.size());
          ASSERT_EQ(static_cast<int64_t>(r.layer_budgets[k].size()), layers);
          for (double b : r.layer_budgets[k]) EXPECT_DOUBLE_EQ(b, kept / n);
          for (double b : r.layer_reference_budgets[k]) EXPECT_DOUBLE_EQ(b, reference / n);
          for (double c : r.layer_coverage[k]) EXPECT_DOUBLE_EQ(c, coverage / n);
          EXPECT_DOUBLE_EQ(r.coverage[k], coverage / n);
          if (!r.layer_floors.empty()) {
            for (int64_t f : r.layer_floors[k]) EXPECT_EQ(f, std::llround(floor / n));
          }
          EXPECT_EQ(r.budgets[k], mb.budget);
          ++k;
        }
      }
      if (std::string(preset) == "baseline") EXPECT_TRUE(r.layer_floors.empty()) << "no floor without DST";
      if (std::string(preset) == "sab+dst") EXPECT_EQ(r.layer_floors.size(), r.microbatch_lengths.size());
    }
  }
}

TEST(RunSimulator, VerticalSlashFirstPlanEqualsTheRealTrainers) {
  // Later plans learn from the kept keys the layers report (the real index against the
  // model), so only the first must agree.
  for (const char* preset : {"baseline", "sab", "sab+dst", "lbb+dst"}) {
    json j = vertical_slash_manifest(preset);
    j["parallelism"]["dp"] = 1;  // the one-process trainer plans for one DP rank
    test::expect_first_plan_equals_the_trainers(j, preset);
  }
}

// The rule of ring_vertical_slash_work.h, key by key: query i keeps all of 0 .. i when
// the shape gives it every key, else its sinks and window whole and each key between
// them with probability (its keys - sink - window) / (keys between).
std::vector<std::vector<double>> brute_force_ring_work(const std::vector<int64_t>& lengths,
                                                       const std::vector<int64_t>& kept, int64_t cp,
                                                       const CpLayout& layout, int64_t sink, int64_t window,
                                                       double spread) {
  // Who holds each token is the trainer's CpSharding (tested on its own); what is
  // counted here is the pairs, key by key.
  const DealtMicrobatch dealt = deal_microbatch(lengths, cp, layout);
  const PackedSequences& packed = dealt.packed;
  const std::vector<int32_t>& owner = dealt.owner;
  std::vector<std::vector<double>> pairs(static_cast<size_t>(cp), std::vector<double>(static_cast<size_t>(cp), 0.0));
  const int64_t F = sink + window;
  for (size_t s = 0; s < lengths.size(); ++s) {
    const int64_t offset = packed.offsets[s], L = lengths[s];
    const double e = VerticalSlashShape{F, spread}.level_for_kept_keys(L, static_cast<double>(kept[s]));
    for (int64_t i = 0; i < L; ++i) {
      const double between = static_cast<double>(i + 1 - F);
      const double extra = query_keys_by_rule(L, F, spread, e, i) - static_cast<double>(F);
      for (int64_t j = 0; j <= i; ++j) {
        double p = 1.0;
        if (i + 1 > F && extra < between && j >= sink && j <= i - window) p = extra / between;
        pairs[static_cast<size_t>(owner[static_cast<size_t>(offset + i)])]
             [static_cast<size_t>(owner[static_cast<size_t>(offset + j)])] += p;
      }
    }
  }
  return pairs;
}

TEST(VerticalSlashRingWork, EqualsTheRuleKeyByKeyOnEveryLayout) {
  const std::vector<int64_t> lengths{300, 17, 1000, 129};
  const std::vector<int64_t> kept{40, 9, 75, 65};  // the 17-token sequence and the 129-token one dense
  for (double spread : {0.0, 0.5, 1.0}) {
    for (int64_t cp : {2, 3, 4}) {
      for (const CpLayout& layout : {CpLayout{CpLayoutKind::kContiguous, 0}, CpLayout{CpLayoutKind::kZigzag, 0},
                                     CpLayout{CpLayoutKind::kStriped, 16}}) {
        SCOPED_TRACE("spread " + std::to_string(spread) + " cp " + std::to_string(cp) + " " + layout.name());
        const RingWork work = vertical_slash_ring_work(lengths, kept, cp, layout, 6, 10, spread, 3);
        const auto expected = brute_force_ring_work(lengths, kept, cp, layout, 6, 10, spread);
        double total = 0;
        for (int64_t a = 0; a < cp; ++a) {
          for (int64_t b = 0; b < cp; ++b) {
            EXPECT_NEAR(work.pairs[a][b], 3.0 * expected[a][b], 1e-7 * (1.0 + expected[a][b])) << a << " <- " << b;
            total += work.pairs[a][b];
          }
        }
        // The expectation keeps each sequence's kept keys per query (up to the level's
        // bisection), summed over 3 heads.
        double kept_pairs = 0;
        for (size_t s = 0; s < lengths.size(); ++s) {
          kept_pairs += static_cast<double>(lengths[s]) *
                        std::min(static_cast<double>(kept[s]), (static_cast<double>(lengths[s]) + 1) / 2);
        }
        EXPECT_NEAR(total, 3.0 * kept_pairs, 1e-6 * kept_pairs);
      }
    }
  }
  // Saturated budgets are dense causal attention: the dense work model's counts.
  const CpLayout zigzag{CpLayoutKind::kZigzag, 0};
  const RingWork dense = moba_ring_work({300, 200}, {0, 0}, 4, zigzag, 64, 2);
  const RingWork saturated = vertical_slash_ring_work({300, 200}, {151, 101}, 4, zigzag, 30, 100, 0.5, 2);
  for (size_t a = 0; a < 4; ++a) {
    for (size_t b = 0; b < 4; ++b) EXPECT_NEAR(saturated.pairs[a][b], dense.pairs[a][b], 1e-9);
  }
  // With the extra keys spread along the positions, zigzag's pairs of early and late
  // chunks balance as dense attention's do; with the same count for every query they do not.
  const RingWork flat = vertical_slash_ring_work({2048}, {700}, 2, zigzag, 30, 100, 0.0, 1);
  const RingWork grown = vertical_slash_ring_work({2048}, {700}, 2, zigzag, 30, 100, 1.0, 1);
  const auto imbalance = [](const RingWork& w) { return std::max(w.row(0), w.row(1)) * 2 / w.total(); };
  EXPECT_GT(imbalance(flat), 1.1);
  EXPECT_LT(imbalance(grown), 1.05);
}

TEST(RunSimulator, VerticalSlashUnderContextParallelismRecordsTheRingsWork) {
  // The sinks sit on the first rank of a contiguous split, which also holds the queries
  // with the fewest keys; striping deals both out: its work imbalance is lower.
  std::map<std::string, double> imbalance;
  for (const char* layout : {"contiguous", "striped"}) {
    json j = vertical_slash_manifest("baseline");
    j["parallelism"] = {{"dp", 1}, {"pp", 1}, {"cp", 2}, {"cp_layout", layout}, {"cp_stripe_tokens", 8}};
    RunSimulator sim = test::simulator_of(j);
    const IterationRecord r = sim.simulate_iteration(0).record;
    ASSERT_EQ(r.cp_kept_pairs.size(), r.microbatch_lengths.size());
    const int64_t layers = qwen2_preset("qwen2-test").num_hidden_layers;
    const int64_t heads = qwen2_preset("qwen2-test").num_attention_heads;
    double sum = 0;
    for (size_t k = 0; k < r.cp_kept_pairs.size(); ++k) {
      double kept = 0, pairs = 0;
      for (size_t i = 0; i < r.microbatch_lengths[k].size(); ++i) {
        const int64_t length = r.microbatch_lengths[k][i];
        kept += static_cast<double>(length) * std::min(static_cast<double>(std::llround(r.sequence_budgets[k][i])),
                                                       (static_cast<double>(length) + 1) / 2);
      }
      for (int64_t p : r.cp_kept_pairs[k]) pairs += static_cast<double>(p);
      // Forward and backward of every layer, every head.
      EXPECT_NEAR(pairs, 2.0 * static_cast<double>(layers * heads) * kept, 2.0 * static_cast<double>(layers) + 1e-6 * pairs);
      sum += r.cp_work_imbalance[k];
    }
    imbalance[layout] = sum / static_cast<double>(r.cp_kept_pairs.size());
  }
  EXPECT_GT(imbalance["contiguous"], imbalance["striped"]);
}

TEST(AnalyticProfile, VerticalSlashCountsKeptPairsAndTheIndex) {
  const Qwen2Config& c = qwen2_preset("qwen2-test");
  VerticalSlashParams p;
  const VerticalSlashPattern pattern(VerticalSlashOptions{p, 1024});
  EXPECT_DOUBLE_EQ(pattern.attended_pairs(1000, 100), 1000.0 * 100);
  EXPECT_DOUBLE_EQ(pattern.attended_pairs(10, 100), 10.0 * 5.5);  // dense causal at most
  const double per_pair = 4.0 * static_cast<double>(c.head_dim * c.num_attention_heads);
  const double index = 2.0 * static_cast<double>(c.head_dim * c.num_attention_heads) * 64 * 1000;
  EXPECT_DOUBLE_EQ(layer_attention_forward_flops(c, pattern, 1000, 100), per_pair * 1e5 + index);
  const LatencyProfile profile =
      make_analytic_profile(c, pattern, {512, 1024}, {16, 256}, device_throughput_preset("h200"));
  EXPECT_EQ(profile.budgets, (std::vector<int64_t>{16, 256}));
  EXPECT_EQ(profile.attention_fields.at("last_queries"), p.last_queries);
  EXPECT_GT(profile.layer_ms[1][1].median, profile.layer_ms[1][0].median);
  EXPECT_THROW(make_analytic_profile(c, pattern, {512, 1024}, {0}, device_throughput_preset("h200")),
               std::invalid_argument);
}

}  // namespace
}  // namespace sb
