// c10d over Gloo from C++: two real processes (sb_dist_worker) meet through a TCPStore
// using torchrun's variables, all-reduce and broadcast exactly; a rank whose peer never
// comes fails within its timeout instead of hanging.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "common/errors.h"
#include "harness/parallel/process_group.h"
#include "tests/support/free_tcp_port.h"
#include "tests/support/run_command.h"
#include "tests/support/worker_processes.h"

namespace sb {
namespace {

using Clock = std::chrono::steady_clock;

using test::rank_env;
using test::slurp;
using test::wait_worker;
using test::Worker;

Worker spawn_worker(const std::string& scenario, std::map<std::string, std::string> env,
                    const std::filesystem::path& log_dir, int index) {
  env["SB_DIST_TIMEOUT_MS"] = env.count("SB_DIST_TIMEOUT_MS") ? env["SB_DIST_TIMEOUT_MS"] : "30000";
  return test::spawn_worker({SB_BINARY_DIR "/tests/sb_dist_worker", scenario}, env,
                            log_dir / ("worker" + std::to_string(index) + ".log"));
}

TEST(GlooProcessGroup, TwoProcessAllReduceAndBroadcastAreExact) {
  auto dir = test::fresh_temp_dir("dist_allreduce");
  const int port = test::free_tcp_port();
  std::vector<Worker> workers;
  for (int rank = 0; rank < 2; ++rank) {
    workers.push_back(spawn_worker("allreduce", rank_env(rank, 2, port), dir, rank));
  }
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  for (int rank = 0; rank < 2; ++rank) {
    const int code = wait_worker(workers[rank], deadline);
    const std::string log = slurp(workers[rank].log);
    EXPECT_EQ(code, 0) << "rank " << rank << ":\n" << log;
    EXPECT_NE(log.find("rank " + std::to_string(rank) + " ok"), std::string::npos) << log;
  }
  std::filesystem::remove_all(dir);
}

TEST(GlooProcessGroup, BarrierClockOffsetIsNearZeroOnOneHost) {
  // Processes on one host share CLOCK_MONOTONIC: the true offset is 0, so the estimate
  // used across hosts shows its own error here (barrier exit skew).
  auto dir = test::fresh_temp_dir("dist_clock");
  const int port = test::free_tcp_port();
  std::vector<Worker> workers;
  for (int rank = 0; rank < 2; ++rank) workers.push_back(spawn_worker("clock", rank_env(rank, 2, port), dir, rank));
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(wait_worker(workers[rank], deadline), 0) << slurp(workers[rank].log);
    const std::string log = slurp(workers[rank].log);
    const size_t at = log.find("offset_ms ");
    ASSERT_NE(at, std::string::npos) << log;
    const double offset = std::stod(log.substr(at + 10));
    if (rank == 0) EXPECT_EQ(offset, 0.0);
    EXPECT_LT(std::abs(offset), 20.0) << "rank " << rank << ": " << log;
  }
  std::filesystem::remove_all(dir);
}

TEST(GlooProcessGroup, MissingPeerFailsWithinTheTimeoutInsteadOfHanging) {
  auto dir = test::fresh_temp_dir("dist_missing_peer");
  auto env = rank_env(0, 2, test::free_tcp_port());
  env["SB_DIST_TIMEOUT_MS"] = "3000";
  const auto start = Clock::now();
  Worker lone = spawn_worker("connect", env, dir, 0);
  const int code = wait_worker(lone, start + std::chrono::seconds(45));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const std::string log = slurp(lone.log);
  EXPECT_NE(code, -1) << "the rank hung past 45 s with a 3 s timeout";
  EXPECT_NE(code, 0) << log;
  EXPECT_NE(log.find("rank failed"), std::string::npos) << log;
  EXPECT_LT(seconds, 45.0);
  std::filesystem::remove_all(dir);
}

TEST(DistEnv, ReadsTorchrunVariablesAndRejectsBadOnes) {
  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "4", 1);
  ::unsetenv("LOCAL_RANK");
  ::setenv("MASTER_ADDR", "10.1.2.3", 1);
  ::setenv("MASTER_PORT", "29555", 1);
  DistEnv env = DistEnv::from_environment();
  EXPECT_EQ(env.rank, 1);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 1);  // defaults to RANK
  EXPECT_EQ(env.master_addr, "10.1.2.3");
  EXPECT_EQ(env.master_port, 29555);

  ::setenv("RANK", "4", 1);
  EXPECT_THROW(DistEnv::from_environment(), ConfigError);
  ::setenv("RANK", "x", 1);
  try {
    DistEnv::from_environment();
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.json_path(), "RANK");
  }
  ::unsetenv("RANK");
  EXPECT_THROW(DistEnv::from_environment(), ConfigError);
}

TEST(DistEnv, ReadsSrunVariablesInsideAJobStepOnly) {
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    ::unsetenv(name);
  }
  // A batch script has SLURM_PROCID but no job step: not a rank.
  ::setenv("SLURM_PROCID", "0", 1);
  ::setenv("SLURM_NTASKS", "8", 1);
  ::unsetenv("SLURM_STEP_NUM_TASKS");
  EXPECT_FALSE(DistEnv::started_as_rank());

  ::setenv("SLURM_STEP_NUM_TASKS", "8", 1);
  ::setenv("SLURM_PROCID", "5", 1);
  ::setenv("SLURM_LOCALID", "1", 1);
  ::setenv("SLURM_STEP_TASKS_PER_NODE", "4(x2)", 1);
  EXPECT_TRUE(DistEnv::started_as_rank());
  try {
    DistEnv::from_environment();
    FAIL() << "several tasks need MASTER_ADDR";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.json_path(), "MASTER_ADDR");
  }
  ::setenv("MASTER_ADDR", "node017", 1);
  const DistEnv env = DistEnv::from_environment();
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 4);
  EXPECT_EQ(env.master_addr, "node017");
  EXPECT_EQ(env.master_port, 29500);
  EXPECT_EQ(env.source, "srun");
  for (const char* name : {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID",
                           "SLURM_STEP_TASKS_PER_NODE", "MASTER_ADDR"}) {
    ::unsetenv(name);
  }
}

}  // namespace
}  // namespace sb
