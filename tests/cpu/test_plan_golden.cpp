// The batch plans and budgets of the checked-in manifests, pinned: quickstart and
// table1-cpu planned for their first iterations, every run of their sweeps, must give
// bit for bit the plans recorded in tests/data/golden/plans.json. The planner is driven
// exactly as the trainer drives it (the run's manifest -> make_dataset,
// method_planner_options, load_method_predictor; observe() with the budgets each plan
// chose), with kept CPU profiles (one per pattern) standing in for the git-ignored ones,
// so that any change in how a manifest reaches the planner shows here.
//
// The golden file was written by this test built on the code before the run-plan
// restructuring (97ba2ad). To record new plans on purpose:
//   SB_UPDATE_GOLDEN=1 build/tests/sb_tests_harness --gtest_filter='PlanGolden.*'

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "harness/balance/batch_planner.h"
#include "harness/config/manifest.h"
#include "harness/data/batch_shape.h"
#include "harness/data/dataset.h"
#include "harness/latency/run_profiles/method_profiles.h"
#include "harness/train/method_planner_options.h"
#include "models/qwen2/qwen2_config.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kSource = SB_SOURCE_DIR;
const fs::path kGolden = kSource / "tests/data/golden/plans.json";
const fs::path kProfile = kSource / "experiments/measured/cpu/table1-cpu/dst__seed=1/profile.json";
// The kept profile of a method whose pattern is not kProfile's (MoBA's).
const std::map<std::string, fs::path> kPatternProfiles{
    {"sliding_window",
     kSource / "experiments/measured/cpu/table1-cpu-sliding-window/sliding_window__seed=1/profile.json"}};
constexpr int64_t kIterations = 12;

// FNV-1a, 64 bits: a hash whose value is the same on every platform and library.
std::string fnv1a_hex(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  std::ostringstream out;
  out << std::hex << h;
  return out.str();
}

json plan_to_json(const GlobalBatchPlan& plan) {
  json ranks = json::array();
  for (const auto& rank : plan.ranks) {
    json mbs = json::array();
    for (const PlannedMicroBatch& mb : rank) {
      // Doubles as their exact bits' decimal text (%.17g through json), so "bit for bit".
      mbs.push_back({{"samples", mb.samples},
                     {"tokens", mb.tokens},
                     {"budget", mb.budget},
                     {"floor_ratio", mb.coverage_floor_ratio},
                     {"reference_k", mb.coverage_reference_k},
                     {"predicted_ms", mb.predicted_ms}});
    }
    ranks.push_back(mbs);
  }
  return ranks;
}

// Every plan of the run's first kIterations iterations, in order.
json plans_of(RunSpec run) {
  Manifest& m = run.manifest;
  for (MethodSection& method : m.methods) {
    if (method.profile.empty()) continue;
    const auto kept = kPatternProfiles.find(method.attention.name());
    method.profile = (kept != kPatternProfiles.end() ? kept->second : kProfile).string();
  }
  const Qwen2Config& config = qwen2_preset(m.model.preset);
  const std::unique_ptr<Dataset> data =
      make_dataset(m.data, m.seed, dataset_limits(m));
  BatchPlanner planner(method_planner_options(m, m.parallelism.dp), load_method_predictor(run));
  json plans = json::array();
  for (int64_t it = 0; it < kIterations; ++it) {
    const std::vector<int64_t> lengths = data->global_batch_shape(it, m.train.global_batch_size).lengths;
    const GlobalBatchPlan plan = planner.plan(lengths);
    std::vector<std::vector<double>> ran;
    for (const auto& rank : plan.ranks) {
      ran.emplace_back();
      for (const PlannedMicroBatch& mb : rank) {
        ran.back().push_back(static_cast<double>(mb.budget > 0 ? mb.budget : planner.options().budget.top_k));
      }
    }
    planner.observe(plan, lengths, ran);
    plans.push_back(plan_to_json(plan));
  }
  return plans;
}

json all_plans() {
  json out = json::object();
  for (const char* name : {"experiments/quickstart.json", "experiments/table1-cpu.json"}) {
    const Manifest manifest = load_manifest(kSource / name);
    for (const RunSpec& run : expand_runs(manifest)) {
      const json plans = plans_of(run);
      out[std::string(name) + ":" + run.name] = {{"iterations", kIterations},
                                                 {"fnv1a", fnv1a_hex(plans.dump())},
                                                 {"first_plan", plans.at(0)}};
    }
  }
  return out;
}

// One run per line, so that a diff of the file names the runs whose plans moved.
std::string golden_text(const json& runs) {
  std::string out = "{\n";
  size_t written = 0;
  for (const auto& [run, entry] : runs.items()) {
    out += " " + json(run).dump() + ": " + entry.dump() + (++written < runs.size() ? ",\n" : "\n");
  }
  return out + "}\n";
}

TEST(PlanGolden, CheckedInManifestsPlanAsRecorded) {
  ASSERT_TRUE(fs::exists(kProfile)) << kProfile;
  const json actual = all_plans();
  if (std::getenv("SB_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(kGolden) << golden_text(actual);
    GTEST_SKIP() << "wrote " << kGolden;
  }
  std::ifstream in(kGolden);
  ASSERT_TRUE(in) << kGolden << " is missing; see the comment at the top of this test";
  const json expected = json::parse(in);
  ASSERT_EQ(expected.size(), actual.size());
  for (const auto& [run, want] : expected.items()) {
    ASSERT_TRUE(actual.contains(run)) << run;
    EXPECT_EQ(actual[run]["first_plan"], want["first_plan"]) << run;
    EXPECT_EQ(actual[run]["fnv1a"], want["fnv1a"]) << run << ": a plan of iterations 0.." << kIterations - 1
                                                   << " differs";
  }
}

}  // namespace
}  // namespace sb
