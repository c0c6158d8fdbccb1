// Interleaved runs through the CLI (`"interleave": {"block_iterations": 2}`, two DP ranks):
// the methods take turns in ABBA blocks, which the progress lines and the records show,
// and each run computes what it computes alone (the oracle: the same manifest run one
// method after another), bit for bit, even with LoRA dropout drawing from the process's
// generator; killed mid-schedule, the interleaved job resumes to the same records.
#include <gtest/gtest.h>

#include <sstream>

#include "tests/dist/job_fixture.h"
#include "tests/support/run_command.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Two methods (dense, LBB) on two DP ranks, 5 iterations, LoRA with dropout: the dropout
// masks come from LibTorch's default generator, which both runs share in one process.
json interleaved_manifest(const std::string& name, int64_t checkpoint_every) {
  json m = test::job_manifest(name, 2, 1, 5, 30, checkpoint_every);
  m["train"]["lora"] = {{"rank", 4}, {"alpha", 8}, {"dropout", 0.3}, {"target_modules", {"q_proj", "v_proj"}}};
  m["methods"] = json::array({{{"name", "dense"}}, {{"name", "lbb"}, {"preset", "lbb"}}});
  m["interleave"] = {{"block_iterations", 2}};
  return m;
}

int run_to_end(const fs::path& manifest, const fs::path& results, const std::string& log,
               const std::map<std::string, std::string>& env = {}) {
  fs::create_directories(results);
  const test::Worker cli = test::start_cli(manifest, results, results / log, env);
  return test::wait_worker(cli, Clock::now() + std::chrono::seconds(300));
}

// The (run, iteration) of each progress line, in the order printed.
std::vector<std::string> progress_order(const std::string& log) {
  std::vector<std::string> order;
  std::istringstream lines(log);
  std::string line;
  while (std::getline(lines, line)) {
    for (const std::string run : {"dense", "lbb"}) {
      const size_t at = line.find(" " + run + "  iteration ");
      if (at == std::string::npos) continue;
      const size_t number = at + run.size() + 13;
      order.push_back(run + line.substr(number, line.find('/', number) - number));
    }
  }
  return order;
}

void expect_same_training(const fs::path& actual_run, const fs::path& expected_run) {
  const auto actual = test::read_records(actual_run);
  const auto expected = test::read_records(expected_run);
  ASSERT_EQ(actual.size(), expected.size()) << actual_run;
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_EQ(actual[i]["loss"].dump(), expected[i]["loss"].dump()) << actual_run << " iteration " << i;
    EXPECT_EQ(actual[i]["grad_norm"].dump(), expected[i]["grad_norm"].dump()) << actual_run << " iteration " << i;
    EXPECT_EQ(actual[i]["microbatch_tokens"], expected[i]["microbatch_tokens"]) << actual_run << " iteration " << i;
  }
}

TEST(InterleavedRuns, TakeTurnsInAbbaBlocksAndTrainAsAlone) {
  const fs::path dir = test::fresh_temp_dir("interleaved_runs");
  const json interleaved = interleaved_manifest("interleaved", 0);
  json alone = interleaved;
  alone.erase("interleave");
  const fs::path interleaved_file = test::write_manifest(dir, interleaved);
  fs::create_directories(dir / "alone");
  const fs::path alone_file = test::write_manifest(dir / "alone", alone);
  ASSERT_EQ(run_to_end(interleaved_file, dir / "a", "run.log"), 0) << test::slurp(dir / "a" / "run.log");
  ASSERT_EQ(run_to_end(alone_file, dir / "b", "run.log"), 0) << test::slurp(dir / "b" / "run.log");

  // Blocks of 2: dense 0-1, lbb 0-1 | lbb 2-3, dense 2-3 | dense 4, lbb 4.
  const std::vector<std::string> expected_order{"dense1", "dense2", "lbb1", "lbb2", "lbb3",
                                                "lbb4",   "dense3", "dense4", "dense5", "lbb5"};
  EXPECT_EQ(progress_order(test::slurp(dir / "a" / "run.log")), expected_order);
  const std::map<std::string, std::vector<std::pair<int, int>>> places{
      {"dense", {{0, 0}, {0, 0}, {1, 1}, {1, 1}, {2, 0}}}, {"lbb", {{0, 1}, {0, 1}, {1, 0}, {1, 0}, {2, 1}}}};
  for (const auto& [run, expected] : places) {
    const auto records = test::read_records(dir / "a" / "interleaved" / run);
    ASSERT_EQ(records.size(), expected.size()) << run;
    for (size_t i = 0; i < records.size(); ++i) {
      EXPECT_EQ(records[i]["interleave_block"], expected[i].first) << run << " iteration " << i;
      EXPECT_EQ(records[i]["interleave_position"], expected[i].second) << run << " iteration " << i;
    }
    for (const auto& record : test::read_records(dir / "b" / "interleaved" / run)) {
      EXPECT_FALSE(record.contains("interleave_block")) << "a run alone has no blocks";
    }
    expect_same_training(dir / "a" / "interleaved" / run, dir / "b" / "interleaved" / run);
    const json context = json::parse(test::slurp(dir / "a" / "interleaved" / run / "context.json"));
    EXPECT_EQ(context["interleave"], json({{"block_iterations", 2}, {"runs", {"dense", "lbb"}}}));
  }
  // The report says how they trained; the warm-up (iteration 0) leaves blocks 0-2 measured.
  const std::string report = test::slurp(dir / "a" / "interleaved" / "report.md");
  EXPECT_NE(report.find("dense, lbb trained interleaved, taking turns in blocks of 2 iterations"), std::string::npos)
      << report;
  EXPECT_NE(report.find(" over 3 blocks."), std::string::npos) << report;
  fs::remove_all(dir);
}

TEST(InterleavedRuns, KilledMidScheduleResumesToTheSameRecords) {
  const fs::path dir = test::fresh_temp_dir("interleaved_resume");
  const fs::path manifest = test::write_manifest(dir, interleaved_manifest("interleaved", 2));
  ASSERT_EQ(run_to_end(manifest, dir / "whole", "run.log"), 0) << test::slurp(dir / "whole" / "run.log");
  // Rank 1 dies when the first run reaches iteration 3: lbb, in block 1 (lbb 2-3 first).
  // Both runs have their checkpoint after iteration 2; dense has records 0-1 only.
  EXPECT_EQ(run_to_end(manifest, dir / "cut", "cut.log", {{"SB_FAULT_INJECT", "crash:rank=1:iteration=3"}}), 1)
      << test::slurp(dir / "cut" / "cut.log");
  EXPECT_EQ(test::read_records(dir / "cut" / "interleaved" / "dense").size(), 2u);
  EXPECT_EQ(test::read_records(dir / "cut" / "interleaved" / "lbb").size(), 3u);
  ASSERT_EQ(run_to_end(manifest, dir / "cut", "resumed.log"), 0) << test::slurp(dir / "cut" / "resumed.log");
  // Resumed at iteration 2 (block 1): lbb 2-3, dense 2-3, then dense 4, lbb 4.
  EXPECT_EQ(progress_order(test::slurp(dir / "cut" / "resumed.log")),
            (std::vector<std::string>{"lbb3", "lbb4", "dense3", "dense4", "dense5", "lbb5"}));
  for (const std::string run : {"dense", "lbb"}) {
    expect_same_training(dir / "cut" / "interleaved" / run, dir / "whole" / "interleaved" / run);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sb
