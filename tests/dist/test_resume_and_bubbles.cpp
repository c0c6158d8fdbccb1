// Checkpoints: a DP2 x PP2 run, and a PP2 x TP2 run started by `sparsebalance run`'s own
// launcher, killed after a checkpoint resume and reproduce the uninterrupted run's losses
// and gradient norms bit for bit. Bubbles: a real PP run with equal micro-batches
// measures close to the 1F1B bubble fraction (p-1)/(m+p-1).
#include <gtest/gtest.h>

#include <algorithm>

#include <sstream>

#include "tests/dist/job_fixture.h"
#include "tests/dist/timeline_oracle.h"
#include "tests/support/run_command.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

int run_to_end(const fs::path& manifest, const fs::path& results, const std::string& log,
               const std::map<std::string, std::string>& env = {}) {
  const test::Worker cli = test::start_cli(manifest, results, results / log, env);
  return test::wait_worker(cli, Clock::now() + std::chrono::seconds(300));
}

// Runs `m` whole, then killed (SIGKILL) on `crash_rank` when iteration 3 starts and run
// again: the second part resumes from the checkpoint of iteration 2 and every record
// equals the whole run's bit for bit. Returns the resumed run's folder.
fs::path expect_resume_repeats_the_whole_run(const fs::path& dir, const json& m, int crash_rank) {
  const fs::path manifest = test::write_manifest(dir, m);
  const fs::path whole = dir / "whole", cut = dir / "cut";
  fs::create_directories(whole);
  fs::create_directories(cut);
  const std::string name = m["name"].get<std::string>();
  EXPECT_EQ(run_to_end(manifest, whole, "whole.log"), 0) << test::slurp(whole / "whole.log");

  // Killed (SIGKILL, no chance to clean up) when iteration 3 starts: the newest
  // checkpoint holds iterations 0-1... up to 2, and records of iteration 2 exist too.
  const int killed = run_to_end(manifest, cut, "cut.log",
                                {{"SB_FAULT_INJECT", "crash:rank=" + std::to_string(crash_rank) + ":iteration=3"}});
  EXPECT_EQ(killed, 1) << test::slurp(cut / "cut.log");
  const fs::path run = cut / name / "dense";
  EXPECT_FALSE(fs::exists(run / "status.json"));
  EXPECT_EQ(test::slurp(run / "checkpoints" / "latest"), "iter_00000002\n");
  EXPECT_EQ(test::read_records(run).size(), 3u);

  EXPECT_EQ(run_to_end(manifest, cut, "resumed.log"), 0) << test::slurp(cut / "resumed.log");
  const std::string resumed_log = test::slurp(cut / "resumed.log");
  EXPECT_NE(resumed_log.find("resuming from its checkpoint"), std::string::npos) << resumed_log;
  EXPECT_NE(resumed_log.find("at iteration 2"), std::string::npos) << resumed_log;

  const auto expected = test::read_records(whole / name / "dense");
  const auto actual = test::read_records(run);
  EXPECT_EQ(actual.size(), 6u);
  EXPECT_EQ(expected.size(), 6u);
  for (size_t i = 0; i < std::min(actual.size(), expected.size()); ++i) {
    EXPECT_EQ(actual[i]["iteration"], static_cast<int64_t>(i));
    // Bit-exact: the same float64 printed the same way.
    EXPECT_EQ(actual[i]["loss"].dump(), expected[i]["loss"].dump()) << "iteration " << i;
    EXPECT_EQ(actual[i]["grad_norm"].dump(), expected[i]["grad_norm"].dump()) << "iteration " << i;
    EXPECT_EQ(actual[i]["lr"].dump(), expected[i]["lr"].dump()) << "iteration " << i;
  }
  const json status = json::parse(test::slurp(run / "status.json"));
  EXPECT_EQ(status["resumed"], true);
  const json context = json::parse(test::slurp(run / "context.json"));
  EXPECT_EQ(context["resumes"].size(), 1u);
  EXPECT_EQ(context["resumes"][0]["resumed_at_iteration"], 2);
  // keep_last = 1: only the newest checkpoint (after iteration 4) is left.
  EXPECT_EQ(test::slurp(run / "checkpoints" / "latest"), "iter_00000004\n");
  EXPECT_FALSE(fs::exists(run / "checkpoints" / "iter_00000002"));
  return run;
}

TEST(Resume, InterruptedRunResumesWithTheUninterruptedLossCurve) {
  const fs::path dir = test::fresh_temp_dir("resume_dist");
  const fs::path run = expect_resume_repeats_the_whole_run(dir, test::job_manifest("resume", 2, 2, 6, 20, 2), 2);
  const auto actual = test::read_records(run);
  ASSERT_EQ(actual.size(), 6u);
  // Both parts of the run followed 1F1B on both pipelines (their micro-batch counts differ).
  std::istringstream lines(test::slurp(run / "timeline_events.jsonl"));
  std::string line;
  for (size_t i = 0; std::getline(lines, line); ++i) {
    test::expect_one_f_one_b_order(json::parse(line), 2, test::microbatch_counts(actual.at(i), 2));
  }
  // The trace covers both parts of the run: 6 iterations x 4 ranks.
  const json trace = json::parse(test::slurp(run / "timeline.json"));
  size_t iteration_events = 0;
  for (const auto& e : trace["traceEvents"]) iteration_events += e.value("cat", "") == "iteration";
  EXPECT_EQ(iteration_events, 24u);
  fs::remove_all(dir);
}

// Tensor parallelism through the CLI's launcher (it starts dp x pp x cp x tp ranks) and
// its checkpoints (gathered unsharded, cut again at load).
TEST(Resume, UnderTensorParallelismTheResumedRunRepeatsTheWholeRun) {
  const fs::path dir = test::fresh_temp_dir("resume_tp_dist");
  json m = test::job_manifest("resume_tp", 1, 2, 6, 20, 2);
  m["parallelism"]["tp"] = 2;
  const fs::path run = expect_resume_repeats_the_whole_run(dir, m, 3);
  const json context = json::parse(test::slurp(run / "context.json"));
  EXPECT_EQ(context["world"]["tp"], 2);
  EXPECT_EQ(context["world"]["world_size"], 4);
  // Every TP collective a rank timed lies inside its iteration: the checkpoints' gathers
  // (after iterations 2 and 4) are not counted as the next iteration's communication.
  std::istringstream lines(test::slurp(dir / "whole" / "resume_tp" / "dense" / "timeline_events.jsonl"));
  std::string line;
  size_t tp_events = 0;
  while (std::getline(lines, line)) {
    const json iteration = json::parse(line);
    for (const json& rank : iteration.at("ranks")) {
      for (const json& e : rank.at("events")) {
        if (e.at(0) != "tp_comm") continue;
        ++tp_events;
        EXPECT_GE(e.at(2).get<double>(), rank.at("start_ms").get<double>())
            << "iteration " << iteration.at("iteration") << " rank " << rank.at("rank") << ": " << e.dump();
        EXPECT_LE(e.at(3).get<double>(), rank.at("end_ms").get<double>())
            << "iteration " << iteration.at("iteration") << " rank " << rank.at("rank") << ": " << e.dump();
      }
    }
  }
  EXPECT_GT(tp_events, 0u);
  fs::remove_all(dir);
}

TEST(PipelineBubble, ReplayOfEqualStagesIsTheTheory) {
  // Equal stages with backward twice the forward: 1F1B idles (p-1)/(m+p-1) of the
  // iteration on every stage, whatever the F:B ratio. The event times in the line do
  // not matter to the replay, only their durations.
  for (const auto& [p, m] : std::vector<std::pair<int64_t, int64_t>>{{2, 4}, {4, 8}, {3, 1}}) {
    json line = {{"iteration", 0}, {"ranks", json::array()}};
    for (int64_t s = 0; s < p; ++s) {
      json events = json::array();
      for (int64_t j = 0; j < m; ++j) {
        events.push_back({"forward", j, 0.0, 1.0});
        events.push_back({"backward", j, 0.0, 2.0});
      }
      line["ranks"].push_back({{"rank", s}, {"stage", s}, {"dp_rank", 0}, {"events", events}});
    }
    EXPECT_NEAR(test::replayed_bubble_fraction(line, p, {m}), double(p - 1) / double(m + p - 1), 1e-12)
        << "p " << p << " m " << m;
  }
}

TEST(PipelineBubble, EqualMicroBatchesIdleLittleMoreThanTheirOneFOneBReplay) {
  // p = 2 stages, m = 4 equal micro-batches (512 tokens each, one thread per rank, the
  // tiny model: about 25 ms forward and 50 ms backward per micro-batch and stage, while
  // the optimizer step and the batch take about 3 ms). Theory: (p-1)/(m+p-1) = 0.2.
  //
  // Checked per measured iteration: every rank ran the textbook 1F1B order, and the
  // measured fraction is at least the one its own forward/backward durations force
  // (replayed with free communication). Checked on the median of 10 iterations: the
  // measured fraction exceeds that replay by at most 0.1. The replay takes the stage
  // times as they were, so a shared CPU host that stretches one micro-batch and not the
  // next (CI saw a median of 0.30, single iterations at 0.36 with replays at 0.33) moves
  // both sides alike; what remains is the optimizer step, data and tied-embedding sync,
  // idle by definition (~2%), and the transfer latency. A pipeline that does not
  // pipeline (fully serial stages measure 1 - 1/p = 0.5, while 1F1B replays to about
  // (p-1)/(m+p-1) = 0.2) fails it by 0.3. The replay itself is checked against that
  // theory with equal stage times in PipelineBubble.ReplayOfEqualStagesIsTheTheory.
  const fs::path dir = test::fresh_temp_dir("bubble");
  json m = json::parse(R"({
    "name": "bubble", "seed": 3, "model": {"preset": "qwen2-tiny"},
    "data": {"synthetic": {"length_mixture": [{"min_tokens": 512, "max_tokens": 512}]}},
    "train": {"iterations": 12, "warmup_iterations": 2, "global_batch_size": 4,
              "max_tokens_per_microbatch": 512, "threads": 1},
    "parallelism": {"pp": 2}, "checkpoint": {"every_iterations": 0},
    "methods": [{"name": "dense"}]
  })");
  const fs::path manifest = test::write_manifest(dir, m);
  ASSERT_EQ(run_to_end(manifest, dir, "out.log"), 0) << test::slurp(dir / "out.log");
  const fs::path run = dir / "bubble" / "dense";
  const auto records = test::read_records(run);
  std::vector<json> lines;
  {
    std::istringstream in(test::slurp(run / "timeline_events.jsonl"));
    std::string line;
    while (std::getline(in, line)) lines.push_back(json::parse(line));
  }
  ASSERT_EQ(records.size(), 12u);
  ASSERT_EQ(lines.size(), 12u);
  std::vector<double> bubbles, excess;
  for (size_t i = 0; i < records.size(); ++i) {
    const json& r = records[i];
    ASSERT_EQ(r["microbatch_tokens"], json::array({512, 512, 512, 512}));
    test::expect_one_f_one_b_order(lines[i], 2, {4});
    // The definitions, recomputed: idle = iter - busy; bubble = mean idle / iter.
    const double iter = r["iter_ms"].get<double>();
    double mean = 0;
    for (double busy : r["per_stage_busy_ms"].get<std::vector<double>>()) {
      EXPECT_LE(busy, iter);
      mean += (iter - busy) / iter / 2;
    }
    EXPECT_NEAR(r["bubble_fraction"].get<double>(), mean, 1e-12);
    const double replayed = test::replayed_bubble_fraction(lines[i], 2, {4});
    EXPECT_GE(r["bubble_fraction"].get<double>(), replayed - 0.02) << "iteration " << i;
    if (!r["warmup"].get<bool>()) {
      bubbles.push_back(r["bubble_fraction"].get<double>());
      excess.push_back(r["bubble_fraction"].get<double>() - replayed);
    }
  }
  ASSERT_EQ(bubbles.size(), 10u);
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return 0.5 * (v[4] + v[5]);
  };
  std::cout << "[bubble] median measured " << median(bubbles) << ", median excess over the 1F1B replay "
            << median(excess) << " (theory with equal stages: (p-1)/(m+p-1) = 0.2)\n";
  EXPECT_LE(median(excess), 0.1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sb
