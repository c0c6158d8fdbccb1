// c10d over Gloo from C++: two real processes (sb_dist_worker) meet through a TCPStore
// using torchrun's variables, all-reduce and broadcast exactly; a rank whose peer never
// comes fails within its timeout instead of hanging.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "harness/common/errors.h"
#include "harness/dist/process_group.h"
#include "tests/support/free_tcp_port.h"
#include "tests/support/run_command.h"

namespace sb {
namespace {

using Clock = std::chrono::steady_clock;

struct Worker {
  pid_t pid = -1;
  std::string log;
};

// posix_spawn rather than fork + setenv: the test process has LibTorch's threads, and
// only async-signal-safe calls are allowed between fork and exec.
Worker spawn_worker(const std::string& scenario, const std::map<std::string, std::string>& env,
                    const std::filesystem::path& log_dir, int index) {
  Worker w;
  w.log = (log_dir / ("worker" + std::to_string(index) + ".log")).string();
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (env.count(entry.substr(0, entry.find('='))) == 0) env_strings.push_back(entry);
  }
  for (const auto& [key, value] : env) env_strings.push_back(key + "=" + value);
  std::vector<char*> envp;
  for (auto& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);

  std::string binary = SB_BINARY_DIR "/tests/sb_dist_worker";
  std::string scenario_arg = scenario;
  char* argv[] = {binary.data(), scenario_arg.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, w.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  const int rc = ::posix_spawn(&w.pid, binary.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("posix_spawn " + binary + " failed: " + std::to_string(rc));
  return w;
}

// Exit code of the worker, or -1 after killing it when it outlives the deadline.
int wait_worker(const Worker& w, Clock::time_point deadline) {
  int status = 0;
  while (Clock::now() < deadline) {
    pid_t done = ::waitpid(w.pid, &status, WNOHANG);
    if (done == w.pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(w.pid, SIGKILL);
  ::waitpid(w.pid, &status, 0);
  return -1;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::map<std::string, std::string> rank_env(int rank, int world, int port) {
  return {{"RANK", std::to_string(rank)},       {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_RANK", std::to_string(rank)}, {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)}, {"SB_DIST_TIMEOUT_MS", "30000"}};
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

}  // namespace
}  // namespace sb
