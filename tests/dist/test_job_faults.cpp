// A rank that crashes or hangs stops the whole job within the timeout, with a message
// naming it, and leaves no process behind: through the local launcher (crash, hang,
// Ctrl-C) and with ranks started directly as torchrun would (one killed from outside).
// Timings are measured from the moment the last record before the fault appeared.
#include <gtest/gtest.h>

#include <signal.h>

#include <thread>

#include "tests/dist/job_fixture.h"
#include "tests/support/free_tcp_port.h"
#include "tests/support/run_command.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using test::Worker;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Waits for the launcher to have started its ranks and returns them.
std::vector<pid_t> launched_ranks(const Worker& launcher, size_t count) {
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < until) {
    const auto children = test::child_processes(launcher.pid);
    if (children.size() >= count) return children;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return {};
}

void expect_all_gone(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) EXPECT_FALSE(test::process_exists(pid)) << "rank process " << pid << " outlived the job";
}

struct FaultRun {
  int exit_code = 0;
  double seconds_after_fault = 0;  // from the last record before the fault to the exit
  std::string output;
};

// DP2 x PP2 through the launcher with SB_FAULT_INJECT=<kind> on rank 1 at iteration 2.
FaultRun run_with_fault(const std::string& kind, double timeout_s) {
  const fs::path dir = test::fresh_temp_dir("fault_" + kind);
  const fs::path manifest = test::write_manifest(dir, test::job_manifest("fault", 2, 2, 50, timeout_s, 0));
  const Worker launcher = test::start_cli(manifest, dir, dir / "out.log",
                                          {{"SB_FAULT_INJECT", kind + ":rank=1:iteration=2"}});
  const std::vector<pid_t> ranks = launched_ranks(launcher, 4);
  EXPECT_EQ(ranks.size(), 4u);
  FaultRun r;
  EXPECT_TRUE(test::wait_for_lines(dir / "fault" / "dense" / "records.jsonl", 2, std::chrono::seconds(120)));
  const auto fault_time = Clock::now();
  r.exit_code = test::wait_worker(launcher, Clock::now() + std::chrono::seconds(120));
  r.seconds_after_fault = seconds_since(fault_time);
  r.output = test::slurp(dir / "out.log");
  expect_all_gone(ranks);
  fs::remove_all(dir);
  return r;
}

TEST(JobFaults, CrashedRankStopsEveryRankAtOnce) {
  const FaultRun r = run_with_fault("crash", 20);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("rank 1 (dp 0, stage 1) was killed by signal 9"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds_after_fault, 20.0) << r.output;
}

TEST(JobFaults, HungRankStopsEveryRankWithinTheTimeout) {
  // SIGSTOP freezes the rank (its heartbeat thread too); the others notice after the
  // 5 s timeout, plus a heartbeat period and the launcher's reaction (about 0.6 s;
  // up to 10 s allowed for a loaded host).
  const FaultRun r = run_with_fault("hang", 5);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("rank 1 (dp 0, stage 1) sent no heartbeat"), std::string::npos) << r.output;
  EXPECT_GT(r.seconds_after_fault, 4.0) << "stopped before the timeout could have passed?\n" << r.output;
  EXPECT_LT(r.seconds_after_fault, 5.0 + 10.0) << r.output;
}

TEST(JobFaults, FailingRankIsNamedByEveryOtherRank) {
  const FaultRun r = run_with_fault("error", 20);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("[rank 1] error: rank 1 (dp 0, stage 1): injected failure"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stopping: rank 1 (dp 0, stage 1) failed: injected failure"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds_after_fault, 20.0) << r.output;
}

TEST(JobFaults, CtrlCStopsTheLauncherAndEveryRank) {
  const fs::path dir = test::fresh_temp_dir("fault_interrupt");
  const fs::path manifest = test::write_manifest(dir, test::job_manifest("interrupt", 2, 2, 200, 20, 0));
  const Worker launcher = test::start_cli(manifest, dir, dir / "out.log");
  const std::vector<pid_t> ranks = launched_ranks(launcher, 4);
  ASSERT_EQ(ranks.size(), 4u);
  ASSERT_TRUE(test::wait_for_lines(dir / "interrupt" / "dense" / "records.jsonl", 1, std::chrono::seconds(120)));
  ::kill(launcher.pid, SIGINT);
  const auto interrupted = Clock::now();
  const int code = test::wait_worker(launcher, Clock::now() + std::chrono::seconds(60));
  const std::string output = test::slurp(dir / "out.log");
  EXPECT_EQ(code, 1) << output;
  EXPECT_LT(seconds_since(interrupted), 10.0) << output;
  EXPECT_NE(output.find("error: interrupted"), std::string::npos) << output;
  expect_all_gone(ranks);
  EXPECT_FALSE(fs::exists(dir / "interrupt" / "dense" / "status.json"));
  fs::remove_all(dir);
}

TEST(JobFaults, RanksStartedLikeTorchrunExitWhenOneIsKilled) {
  // No launcher: four `sparsebalance run` processes with RANK/WORLD_SIZE/MASTER_*; rank 1
  // is killed from outside, the others must exit non-zero within the 10 s timeout and
  // name it.
  const fs::path dir = test::fresh_temp_dir("fault_torchrun");
  const fs::path manifest = test::write_manifest(dir, test::job_manifest("torchrun", 2, 2, 200, 10, 0));
  const int port = test::free_tcp_port();
  std::vector<Worker> ranks;
  for (int rank = 0; rank < 4; ++rank) {
    ranks.push_back(test::spawn_worker(
        {SB_BINARY_DIR "/sparsebalance", "run", manifest.string(), "--results", dir.string()},
        test::rank_env(rank, 4, port), dir / ("rank" + std::to_string(rank) + ".log")));
  }
  ASSERT_TRUE(test::wait_for_lines(dir / "torchrun" / "dense" / "records.jsonl", 2, std::chrono::seconds(120)));
  ::kill(ranks[1].pid, SIGKILL);
  const auto killed = Clock::now();
  EXPECT_EQ(test::wait_worker(ranks[1], Clock::now() + std::chrono::seconds(10)), 128 + SIGKILL);
  for (int rank : {0, 2, 3}) {
    const int code = test::wait_worker(ranks[rank], killed + std::chrono::seconds(30));
    const double seconds = seconds_since(killed);
    const std::string log = test::slurp(ranks[rank].log);
    EXPECT_EQ(code, 1) << "rank " << rank << ":\n" << log;
    EXPECT_LT(seconds, 10.0 + 10.0) << "rank " << rank << ":\n" << log;
    EXPECT_NE(log.find("rank 1 (dp 0, stage 1)"), std::string::npos) << "rank " << rank << ":\n" << log;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sb
