// The run plan: made once, it travels as JSON to the ranks and comes back as the same
// runs and decisions (the oracle: the plan before the trip); a sweep that would change
// the job's ranks is refused before anything starts; a broken plan file is named.
#include <gtest/gtest.h>

#include <fstream>

#include "common/errors.h"
#include "harness/config/run_spec_json.h"
#include "harness/runner/run_plan.h"
#include "tests/support/run_command.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json swept_manifest() {
  return json::parse(R"({
    "name": "plan", "seed": 3,
    "model": {"preset": "qwen2-test"},
    "data": {"synthetic": {"length_mixture": [{"min_tokens": 8, "max_tokens": 60}]}},
    "train": {"iterations": 3, "max_tokens_per_microbatch": 64},
    "methods": [{"name": "dense"},
                {"name": "dst", "attention": {"name": "moba", "block_size": 16, "top_k": 2},
                 "batching": "lbb", "budget": "dst", "profile": "profiles/none.json"}],
    "sweep": {"seed": [1, 2], "methods.dst.p": [0.1, 0.3]}
  })");
}

RunSelection selection_in(const fs::path& results) {
  RunSelection selection;
  selection.manifest_file = "experiments/plan.json";
  selection.results_root = results;
  return selection;
}

TEST(RunPlan, SurvivesTheTripToTheRanks) {
  const fs::path results = test::fresh_temp_dir("run_plan_trip");
  json j = swept_manifest();
  j["interleave"] = {{"block_iterations", 4}};
  const Manifest manifest = parse_manifest(j, "experiments/plan.json");
  const RunPlan plan = plan_runs(manifest, selection_in(results));
  // dense once per seed, dst once per seed x p; grouped by seed, dense first in each.
  ASSERT_EQ(plan.runs.size(), 6u);
  EXPECT_EQ(plan.runs[0].spec.name, "dense__seed=1");
  EXPECT_EQ(plan.runs[3].spec.name, "dense__seed=2");
  EXPECT_EQ(plan.manifest_dir, results / "plan");

  const RunPlan back = run_plan_from_json(json::parse(run_plan_to_json(plan).dump()));
  EXPECT_EQ(back.manifest_name, "plan");
  EXPECT_EQ(back.manifest_file, "experiments/plan.json");
  EXPECT_EQ(back.manifest_dir, plan.manifest_dir);
  EXPECT_EQ(back.interleave_block_iterations, 4);
  ASSERT_EQ(back.runs.size(), plan.runs.size());
  for (size_t i = 0; i < plan.runs.size(); ++i) {
    const RunSpec& a = plan.runs[i].spec;
    const RunSpec& b = back.runs[i].spec;
    EXPECT_EQ(b.name, a.name);
    EXPECT_EQ(b.method, a.method);
    EXPECT_EQ(b.baseline_method, a.baseline_method);
    EXPECT_EQ(b.is_baseline, a.is_baseline);
    EXPECT_EQ(b.sweep_point, a.sweep_point);
    EXPECT_EQ(manifest_to_json(b.manifest), manifest_to_json(a.manifest)) << a.name;
    EXPECT_EQ(b.manifest.source, a.manifest.source) << "messages name the manifest's own JSON paths";
    EXPECT_EQ(b.manifest.file, "experiments/plan.json");
    EXPECT_EQ(run_decision_to_json(back.runs[i].decision), run_decision_to_json(plan.runs[i].decision));
  }
  EXPECT_EQ(back.pending().size(), 6u);
  EXPECT_EQ(back.layout().world_size(), 1);
  fs::remove_all(results);
}

TEST(RunPlan, CarriesTheDecisionsMadeFromTheResultsFolder) {
  const fs::path results = test::fresh_temp_dir("run_plan_decisions");
  const Manifest manifest = parse_manifest(swept_manifest(), "experiments/plan.json");
  // dense__seed=1 complete with this very manifest: skipped; dense__seed=2 complete with
  // another: a conflict unless --force, which replaces it.
  const std::vector<RunSpec> runs = select_runs(manifest, selection_in(results));
  const fs::path same = results / "plan" / runs[0].name;
  fs::create_directories(same);
  std::ofstream(same / "manifest.resolved.json") << manifest_to_json(runs[0].manifest).dump();
  std::ofstream(same / "status.json") << "{}";
  EXPECT_EQ(plan_runs(manifest, selection_in(results)).pending().size(), 5u);

  const fs::path other = results / "plan" / runs[3].name;
  fs::create_directories(other);
  std::ofstream(other / "manifest.resolved.json") << manifest_to_json(runs[0].manifest).dump();
  std::ofstream(other / "status.json") << "{}";
  EXPECT_THROW(plan_runs(manifest, selection_in(results)), ConfigError);
  RunSelection forced = selection_in(results);
  forced.force = true;
  const RunPlan plan = plan_runs(manifest, forced);
  EXPECT_EQ(plan.runs[0].decision.disposition, Disposition::kReplaceComplete);
  EXPECT_EQ(plan.runs[3].decision.disposition, Disposition::kReplaceComplete);
  fs::remove_all(results);
}

TEST(RunPlan, ComparisonsAreTheRunsOfOneNonMethodSweepPoint) {
  const Manifest manifest = parse_manifest(swept_manifest(), "experiments/plan.json");
  const RunPlan plan = plan_runs(manifest, selection_in(test::fresh_temp_dir("run_plan_comparisons")));
  EXPECT_EQ(plan.interleave_block_iterations, 0) << "without \"interleave\" runs train one after another";
  // Per seed: dense and dst at p 0.1 and 0.3 (the method axis does not split them).
  const std::vector<std::vector<size_t>> expected{{0, 1, 2}, {3, 4, 5}};
  EXPECT_EQ(plan.comparisons(), expected);
  for (const auto& comparison : plan.comparisons()) {
    for (size_t i : comparison) {
      EXPECT_EQ(plan.runs[i].spec.sweep_point.at("seed"), plan.runs[comparison.front()].spec.sweep_point.at("seed"));
    }
  }
}

TEST(RunPlan, InterleavingIsOneChoiceForTheInvocation) {
  json j = swept_manifest();
  j["sweep"] = {{"interleave.block_iterations", {1, 2}}};
  j["interleave"] = {{"block_iterations", 1}};
  try {
    parse_manifest(j, "experiments/plan.json");
    FAIL() << "a sweep over the interleaving was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.json_path(), "$.sweep[\"interleave.block_iterations\"]");
  }
  j = swept_manifest();
  j["interleave"] = {{"block_iterations", 0}};
  try {
    parse_manifest(j, "experiments/plan.json");
    FAIL() << "a block of no iterations was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.json_path(), "$.interleave.block_iterations");
  }
  // Not part of a run's resolved manifest: interleaving changes how runs are measured,
  // not what they compute, so kept runs stay complete.
  j["interleave"] = {{"block_iterations", 3}};
  const Manifest interleaved = parse_manifest(j, "experiments/plan.json");
  const Manifest alone = parse_manifest(swept_manifest(), "experiments/plan.json");
  EXPECT_EQ(manifest_to_json(interleaved), manifest_to_json(alone));
}

TEST(RunPlan, RefusesASweepThatChangesTheRanks) {
  json j = swept_manifest();
  j["sweep"] = {{"parallelism.dp", {1, 2}}};
  const Manifest manifest = parse_manifest(j, "experiments/plan.json");
  try {
    plan_runs(manifest, selection_in(test::fresh_temp_dir("run_plan_ranks")));
    FAIL() << "a sweep over dp was planned";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.json_path(), "$.sweep[\"parallelism.dp\"]");
    EXPECT_NE(std::string(e.what()).find("sparsebalance simulate"), std::string::npos) << e.what();
  }
}

TEST(RunPlan, ABrokenPlanFileIsNamed) {
  const fs::path dir = test::fresh_temp_dir("run_plan_broken");
  std::ofstream(dir / "plan.json") << R"({"manifest_name": "x", "runs": []})";
  try {
    read_run_plan(dir / "plan.json");
    FAIL() << "an incomplete plan was read";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), (dir / "plan.json").string());
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sb
