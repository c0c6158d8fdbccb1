// Sliding-window attention's harness side: the manifest keys (round trip, errors naming
// the JSON path), the simulator's coverage model by hand, simulated runs recording what
// the model gives, the first plan of a simulated run equal to the real trainer's (which
// trains qwen2-test with the sliding-window backend), the ring's work under CP, and the
// analytic profile's pairs.
#include <gtest/gtest.h>

#include <cmath>

#include "common/errors.h"
#include "harness/config/manifest.h"
#include "harness/latency/analytic_profile.h"
#include "harness/patterns/attention_patterns.h"
#include "harness/patterns/sliding_window/sliding_window_simulation.h"
#include "harness/sim/run_simulator.h"
#include "harness/train/trainer.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_pattern.h"
#include "tests/support/first_plan_check.h"
#include "tests/support/small_simulation.h"

namespace sb {
namespace {

using nlohmann::json;

TEST(SlidingWindowManifest, KeysRoundTripAndBadValuesNameTheirPath) {
  const AttentionOptions options = parse_attention(
      json{{"name", "sliding_window"}, {"window", 100}, {"sink_tokens", 0}, {"block_size", 32}}, "$.attention", "m.json");
  EXPECT_EQ(options.name(), "sliding_window");
  EXPECT_EQ(options.pattern().default_budget(), 100);
  EXPECT_EQ(attention_to_json(options),
            (json{{"name", "sliding_window"}, {"window", 100}, {"sink_tokens", 0}, {"block_size", 32}}));
  EXPECT_EQ(parse_attention(attention_to_json(options), "$", "m.json"), options);
  EXPECT_EQ(attention_to_json(parse_attention(json("sliding_window"), "$", "m.json")),
            (json{{"name", "sliding_window"}, {"window", 512}, {"sink_tokens", 4}, {"block_size", 64}}));
  const auto message_of = [](const json& value) {
    try {
      parse_attention(value, "$.methods[0].attention", "m.json");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string m = message_of({{"name", "sliding_window"}, {"window", 0}});
  EXPECT_NE(m.find("m.json"), std::string::npos) << m;
  EXPECT_NE(m.find("$.methods[0].attention.window"), std::string::npos) << m;
  EXPECT_NE(m.find(">= 1"), std::string::npos) << m;
  m = message_of({{"name", "sliding_window"}, {"sink_tokens", -2}});
  EXPECT_NE(m.find("sink_tokens"), std::string::npos) << m;
  m = message_of({{"name", "sliding_window"}, {"top_k", 3}});  // MoBA's key
  EXPECT_NE(m.find("top_k"), std::string::npos) << m;
  EXPECT_NE(m.find("moba"), std::string::npos) << m;
}

TEST(SlidingWindowPattern, GpuContextParallelismIsRefusedUpFront) {
  const SlidingWindowPattern pattern(SlidingWindowOptions{});
  EXPECT_FALSE(pattern.training_problem({false, false, 64, "fp32", "methods[0]", 4}).has_value()) << "the CPU ring";
  EXPECT_FALSE(pattern.training_problem({true, true, 128, "bf16-mixed", "methods[0]", 1}).has_value()) << "one GPU rank";
  const auto problem = pattern.training_problem({true, true, 128, "bf16-mixed", "methods[1]", 2});
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->key, "attention");
  EXPECT_NE(problem->problem.find("cp 2"), std::string::npos) << problem->problem;
}

// H(n)(s) written out.
double harmonic(int64_t n, double s) {
  double h = 0;
  for (int64_t d = 1; d <= n; ++d) h += std::pow(static_cast<double>(d), -s);
  return h;
}

TEST(SlidingWindowCoverageModel, CoverageAndFloorByHand) {
  const SlidingWindowCoverageModel model(0.8);
  // L = 3: the queries 0, 1, 2 (all last), window 2: 1, 1, H(2)/H(3).
  EXPECT_NEAR(model.coverage(3, 2), (1 + 1 + harmonic(2, 0.8) / harmonic(3, 0.8)) / 3, 1e-15);
  EXPECT_DOUBLE_EQ(model.coverage(500, 500), 1.0);
  // L = 500: the last 64 queries.
  double sum = 0;
  for (int64_t p = 436; p < 500; ++p) sum += harmonic(std::min<int64_t>(40, p + 1), 0.8) / harmonic(p + 1, 0.8);
  EXPECT_NEAR(model.coverage(500, 40), sum / 64, 1e-12);
  for (double ratio : {0.5, 0.9, 0.99}) {
    const double target = ratio * model.coverage(500, 128);
    int64_t want = 1;
    while (model.coverage(500, want) < target) ++want;
    EXPECT_EQ(model.floor_window(500, 128, ratio), want) << ratio;
  }
  double uniform = 0;  // exponent 0: every key alike, a query keeps min(W, p + 1) / (p + 1)
  for (int64_t p = 0; p < 64; ++p) uniform += std::min<double>(16, static_cast<double>(p + 1)) / static_cast<double>(p + 1);
  EXPECT_NEAR(SlidingWindowCoverageModel(0.0).coverage(64, 16), uniform / 64, 1e-15);
  EXPECT_THROW(SlidingWindowCoverageModel(-1.0), std::invalid_argument);
}

json sliding_window_manifest(const std::string& preset) {
  json j = test::small_simulation_manifest_json();
  j["parallelism"] = {{"dp", 2}, {"pp", 1}};
  j["data"] = {{"synthetic", {{"length_mixture", json::array({{{"weight", 0.5}, {"min_tokens", 16}, {"max_tokens", 60}},
                                                              {{"weight", 0.5}, {"min_tokens", 120}, {"max_tokens", 200}}})}}}};
  j["train"]["max_tokens_per_microbatch"] = 256;
  j["train"]["global_batch_size"] = 8;
  j["method_defaults"] = {{"attention", {{"name", "sliding_window"}, {"window", 24}, {"sink_tokens", 2}, {"block_size", 8}}},
                          {"dst", {{"p", 0.1}, {"k_min", 4}}}};
  j["simulation"]["coverage"] = {{"exponent", 0.7}};
  const std::string batching = preset.rfind("sab", 0) == 0 ? "sab" : preset.rfind("lbb", 0) == 0 ? "lbb" : "sequential";
  const std::string budget = preset.find("dst") != std::string::npos ? "dst" : "fixed";
  j["methods"] = json::array({{{"name", "x"}, {"batching", batching}, {"budget", budget}}});
  return j;
}

TEST(RunSimulator, SlidingWindowRecordsTheModelsWindows) {
  for (const char* preset : {"baseline", "sab+dst"}) {
    RunSimulator sim = test::simulator_of(sliding_window_manifest(preset));
    const auto* simulation = dynamic_cast<const SlidingWindowSimulation*>(&sim.attention());
    ASSERT_NE(simulation, nullptr);
    const SlidingWindowCoverageModel& model = simulation->model();
    const int64_t layers = qwen2_preset("qwen2-test").num_hidden_layers;
    bool floor_moved = false;
    for (int64_t it = 0; it < 3; ++it) {
      const SimulatedIteration x = sim.simulate_iteration(it);
      const IterationRecord& r = x.record;
      size_t k = 0;
      for (const auto& rank : x.plan.ranks) {
        for (const PlannedMicroBatch& mb : rank) {
          const std::vector<int64_t>& lengths = r.microbatch_lengths[k];
          const int64_t planned = mb.budget > 0 ? mb.budget : 24;
          double windows = 0, coverage = 0;
          int64_t floor = 0;
          for (int64_t length : lengths) {
            int64_t w = planned;
            if (mb.coverage_floor_ratio > 0) {
              const int64_t f = model.floor_window(length, mb.coverage_reference_k, mb.coverage_floor_ratio);
              floor = std::max(floor, f);
              floor_moved = floor_moved || f > planned;
              w = std::max(w, f);
            }
            windows += static_cast<double>(w);
            coverage += model.coverage(length, w);
          }
          const auto n = static_cast<double>(lengths.size());
          ASSERT_EQ(static_cast<int64_t>(r.layer_budgets[k].size()), layers);
          for (double b : r.layer_budgets[k]) EXPECT_DOUBLE_EQ(b, windows / n) << preset;
          EXPECT_DOUBLE_EQ(r.coverage[k], coverage / n) << preset;
          EXPECT_EQ(r.budgets[k], planned) << preset;
          if (!r.layer_floors.empty()) {
            for (int64_t f : r.layer_floors[k]) EXPECT_EQ(f, floor) << preset;
          }
          ++k;
        }
      }
    }
    if (std::string(preset) == "sab+dst") EXPECT_TRUE(floor_moved) << "non-vacuous: DST's floor raised some window";
  }
}

TEST(RunSimulator, SlidingWindowFirstPlanEqualsTheRealTrainers) {
  for (const char* preset : {"baseline", "sab", "sab+dst"}) {
    json j = sliding_window_manifest(preset);
    j["parallelism"]["dp"] = 1;  // the one-process trainer plans for one DP rank
    test::expect_first_plan_equals_the_trainers(j, preset);
  }
}

TEST(RunSimulator, SlidingWindowUnderContextParallelismRecordsTheWindowsPairs) {
  json j = sliding_window_manifest("baseline");
  j["parallelism"] = {{"dp", 1}, {"pp", 1}, {"cp", 2}, {"cp_layout", "zigzag"}};
  RunSimulator sim = test::simulator_of(j);
  const IterationRecord r = sim.simulate_iteration(0).record;
  ASSERT_EQ(r.cp_kept_pairs.size(), r.microbatch_lengths.size());
  const Qwen2Config& c = qwen2_preset("qwen2-test");
  for (size_t k = 0; k < r.cp_kept_pairs.size(); ++k) {
    double want = 0, pairs = 0;
    for (int64_t length : r.microbatch_lengths[k]) want += sliding_window_pairs(length, 24, 2);
    for (int64_t p : r.cp_kept_pairs[k]) pairs += static_cast<double>(p);
    // Forward and backward of every layer, every head.
    EXPECT_DOUBLE_EQ(pairs, 2.0 * static_cast<double>(c.num_hidden_layers * c.num_attention_heads) * want) << k;
  }
}

TEST(AnalyticProfile, SlidingWindowCountsTheWindowsPairsAndTheCoverageQueries) {
  const Qwen2Config& c = qwen2_preset("qwen2-test");
  const SlidingWindowPattern pattern(SlidingWindowOptions{512, 4, 64});
  EXPECT_DOUBLE_EQ(pattern.attended_pairs(1000, 100), sliding_window_pairs(1000, 100, 4));
  EXPECT_DOUBLE_EQ(pattern.attended_pairs(10, 100), 55.0);  // dense causal at most
  const double per_pair = 4.0 * static_cast<double>(c.head_dim * c.num_attention_heads);
  const double coverage = 2.0 * static_cast<double>(c.head_dim * c.num_attention_heads) * 64 * 1000;
  EXPECT_DOUBLE_EQ(layer_attention_forward_flops(c, pattern, 1000, 100),
                   per_pair * sliding_window_pairs(1000, 100, 4) + coverage);
  const LatencyProfile profile =
      make_analytic_profile(c, pattern, {512, 1024}, {16, 256}, device_throughput_preset("h200"));
  EXPECT_EQ(profile.attention_fields.at("sink_tokens"), 4);
  EXPECT_EQ(profile.block_size(), 64);
  EXPECT_GT(profile.layer_ms[1][1].median, profile.layer_ms[1][0].median);
  EXPECT_EQ(pattern.profile_budgets(1000, 0), (std::vector<int64_t>{64, 128, 256, 512, 1000}));
  EXPECT_EQ(pattern.profile_budgets(300, 2000), (std::vector<int64_t>{64, 128, 256, 300}));
}

}  // namespace
}  // namespace sb
