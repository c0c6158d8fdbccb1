// Tensor parallelism through `sparsebalance run`: a run's records are those of the same
// run on one rank. Vertical-slash splits each layer's heads over the TP ranks, and every
// rank sums the layer's statistics over them (docs/tensor_parallel.md, "Attention and
// budgets"), so the kept keys, coverage and the rule's budgets the record carries are
// the whole layer's, and the planner's estimators learn from them what one rank would.
// Under context parallelism too (MoBA's kept pairs, coverage and DST's floor).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "tests/dist/job_fixture.h"
#include "tests/support/run_command.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// What the tests share: qwen2-test-kv4 (GQA 8:4: tp 2 splits whole groups), no warm-up.
json records_manifest(const std::string& name, int64_t iterations) {
  json m = test::job_manifest(name, 1, 1, iterations, 60, 0);
  m["model"] = {{"preset", "qwen2-test-kv4"}};
  m["train"]["warmup_iterations"] = 0;
  return m;
}

// The records of `method` of run `m` under dir / tag.
std::vector<json> records_of(const fs::path& dir, const json& m, const std::string& tag, const std::string& method) {
  return test::read_records(dir / tag / (m["name"].get<std::string>() + "_" + tag) / method);
}

// Runs `m` with tp ranks into dir / tag; returns the records of its method `method`. A DST
// method measures its profile on first use, one per run (profiles are keyed by tp).
std::vector<json> run_with_tp(const fs::path& dir, json m, int64_t tp, const std::string& tag,
                              const std::string& method = "vs") {
  m["name"] = m["name"].get<std::string>() + "_" + tag;
  m["parallelism"]["tp"] = tp;
  for (json& each : m["methods"]) {
    if (each.value("preset", "") == "dst") {
      each["profile"] = (dir / (tag + "-" + each.at("name").get<std::string>() + "-profile.json")).string();
    }
  }
  const fs::path manifest = test::write_manifest(dir, m);
  const fs::path results = dir / tag;
  fs::create_directories(results);
  const test::Worker cli = test::start_cli(manifest, results, results / "out.log");
  const int code = test::wait_worker(cli, std::chrono::steady_clock::now() + std::chrono::seconds(300));
  EXPECT_EQ(code, 0) << test::slurp(results / "out.log");
  return test::read_records(results / m["name"].get<std::string>() / method);
}

// Two records of one iteration: every layer's coverage within `tolerance`, the loss within
// 1e-5 relative. Returns whether any coverage is below 0.999 (the pattern dropped keys).
bool expect_same_coverage_and_loss(const json& one, const json& two, double tolerance) {
  const json& coverage_one = one.at("layer_coverage");
  const json& coverage_two = two.at("layer_coverage");
  EXPECT_EQ(coverage_two.size(), coverage_one.size());
  bool sparse = false;
  for (size_t k = 0; k < std::min(coverage_one.size(), coverage_two.size()); ++k) {
    for (size_t l = 0; l < coverage_one[k].size(); ++l) {
      EXPECT_NEAR(coverage_two[k][l].get<double>(), coverage_one[k][l].get<double>(), tolerance);
      sparse = sparse || coverage_one[k][l].get<double>() < 0.999;
    }
  }
  EXPECT_NEAR(two.at("loss").get<double>(), one.at("loss").get<double>(), 1e-5 * std::abs(one.at("loss").get<double>()));
  return sparse;
}

TEST(TensorParallelRecords, VerticalSlashStatisticsAreTheWholeLayersOnTwoRanks) {
  const fs::path dir = test::fresh_temp_dir("tp_records");
  json m = records_manifest("tp_vs", 3);
  m["methods"] = json::parse(R"([{"name": "vs",
      "attention": {"name": "vertical_slash", "budget": "top_k", "vertical_count": 3, "slash_count": 2,
                    "sink_tokens": 2, "local_window": 3, "last_queries": 8, "block_size": 4, "expected_keys": 12}}])");
  const std::vector<json> one = run_with_tp(dir, m, 1, "tp1");
  const std::vector<json> two = run_with_tp(dir, m, 2, "tp2");
  ASSERT_EQ(one.size(), 3u);
  ASSERT_EQ(two.size(), one.size());
  bool sparse = false;
  for (size_t i = 0; i < one.size(); ++i) {
    SCOPED_TRACE("iteration " + std::to_string(i));
    // The same plans and, per micro-batch and layer, the same statistics.
    EXPECT_EQ(two[i].at("microbatch_lengths"), one[i].at("microbatch_lengths"));
    EXPECT_EQ(two[i].at("layer_budgets"), one[i].at("layer_budgets"));
    EXPECT_EQ(two[i].at("layer_reference_budgets"), one[i].at("layer_reference_budgets"));
    EXPECT_EQ(two[i].at("sequence_budgets"), one[i].at("sequence_budgets"));
    // The index reads q and k in float32, which the TP ranks' sharded projections round
    // differently from one rank's (seen: 7e-11); the kept keys, integers, agree.
    sparse = expect_same_coverage_and_loss(one[i], two[i], 1e-7) || sparse;
  }
  EXPECT_TRUE(sparse) << "non-vacuous: the pattern drops keys";
  fs::remove_all(dir);
}

// DST over vertical-slash with the heads split over TP ranks, through `sparsebalance run`
// (profiles measured on first use, the planner, the records), alone and on a CP ring. The
// two runs' budgets come from their own measured profiles, so their lists differ; what
// does not depend on the budgets must agree at iteration 0: the rule's kept keys (the
// reference) and DST's floor of every layer. The level search itself, under the same
// requests on both sides, is checked against one process in
// TensorParallel.TwoRanksWithVerticalSlashUnderABudgetEqualOneProcess.
TEST(TensorParallelRecords, DstOverVerticalSlashRunsOnTwoTpRanksAloneAndOnARing) {
  const fs::path dir = test::fresh_temp_dir("tp_vs_dst");
  json m = records_manifest("tp_vs_dst", 2);
  m["methods"] = json::parse(R"([{"name": "vs", "preset": "dst", "dst": {"p": 0.3},
      "attention": {"name": "vertical_slash", "budget": "top_p", "p": 0.9, "sink_tokens": 2, "local_window": 3,
                    "last_queries": 8, "block_size": 4, "expected_keys": 12}}])");
  for (const int64_t cp : {1, 2}) {
    SCOPED_TRACE("cp " + std::to_string(cp));
    if (cp > 1) {
      m["parallelism"]["cp"] = cp;
      m["parallelism"]["cp_layout"] = "striped";
    }
    const std::string tag = "cp" + std::to_string(cp);
    const std::vector<json> one = run_with_tp(dir, m, 1, tag + "_tp1");
    const std::vector<json> two = run_with_tp(dir, m, 2, tag + "_tp2");
    ASSERT_EQ(one.size(), 2u);
    ASSERT_EQ(two.size(), one.size());
    EXPECT_EQ(two[0].at("microbatch_lengths"), one[0].at("microbatch_lengths"));
    EXPECT_EQ(two[0].at("layer_reference_budgets"), one[0].at("layer_reference_budgets"));
    ASSERT_TRUE(one[0].contains("layer_floors"));
    EXPECT_EQ(two[0].at("layer_floors"), one[0].at("layer_floors"));
    // The planner's observations come through the exchange on two ranks; the overhead
    // includes it. (The budgets of the second plan may differ: each tp has its own profile.)
    for (const json& r : two) {
      EXPECT_GT(r.at("plan_exchange_ms").get<double>(), 0.0);
      EXPECT_GE(r.at("balance_overhead_ms").get<double>(), r.at("plan_exchange_ms").get<double>());
    }
  }
  fs::remove_all(dir);
}

// Context and tensor parallelism together (cp 2 x tp 2 against cp 2 alone): each CP
// rank's kept pairs are summed over its TP ranks' heads, a layer's coverage is the mean
// over the TP ranks, and DST runs (docs/context_parallel.md, "With tensor parallelism").
TEST(TensorParallelRecords, ContextParallelMobaRecordsAreTheWholeLayersOnTwoTpRanks) {
  const fs::path dir = test::fresh_temp_dir("cp_tp_records");
  json m = records_manifest("cp_tp_moba", 2);
  m["parallelism"]["cp"] = 2;
  m["parallelism"]["cp_layout"] = "zigzag";
  m["methods"] = json::parse(R"([
      {"name": "moba", "attention": {"name": "moba", "block_size": 8, "top_k": 2}},
      {"name": "dst", "preset": "dst", "attention": {"name": "moba", "block_size": 8, "top_k": 3},
       "dst": {"p": 0.05}}])");
  const std::vector<json> one = run_with_tp(dir, m, 1, "tp1", "moba");
  const std::vector<json> two = run_with_tp(dir, m, 2, "tp2", "moba");
  const std::vector<json> dst_one = records_of(dir, m, "tp1", "dst"), dst_two = records_of(dir, m, "tp2", "dst");
  ASSERT_EQ(one.size(), 2u);
  ASSERT_EQ(two.size(), one.size());
  bool sparse = false;
  for (size_t i = 0; i < one.size(); ++i) {
    SCOPED_TRACE("iteration " + std::to_string(i));
    EXPECT_EQ(two[i].at("microbatch_lengths"), one[i].at("microbatch_lengths"));
    EXPECT_EQ(two[i].at("layer_budgets"), one[i].at("layer_budgets"));
    EXPECT_EQ(two[i].at("cp_kept_pairs"), one[i].at("cp_kept_pairs"));
    sparse = expect_same_coverage_and_loss(one[i], two[i], 1e-9) || sparse;
    ASSERT_EQ(two[i].at("tp_comm_ms").size(), two[i].at("cp_kept_pairs").size());
    EXPECT_EQ(two[i].at("tp_comm_ms")[0].size(), 2u);
  }
  EXPECT_TRUE(sparse) << "non-vacuous: MoBA drops key blocks";
  // DST: the two runs' budgets come from their own measured profiles, but iteration 0's
  // floors depend only on the weights and the floor ratio. (At these seeded weights every
  // floor is k0 on one rank or two heads alike: the head sum inside the ring is checked in
  // tests/cpu/test_ring_backend_head_shards.cpp, where the shards' floors differ alone.)
  ASSERT_FALSE(dst_one.empty());
  ASSERT_FALSE(dst_two.empty());
  ASSERT_TRUE(dst_one[0].contains("layer_floors"));
  EXPECT_EQ(dst_two[0].at("microbatch_lengths"), dst_one[0].at("microbatch_lengths"));
  EXPECT_EQ(dst_two[0].at("layer_floors"), dst_one[0].at("layer_floors"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sb
