#pragma once
// Child processes for the multi-process tests: started with posix_spawn (the test
// process has LibTorch's threads; only async-signal-safe calls are allowed between
// fork and exec), output to a log file, waited for with a deadline.

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace sb::test {

struct Worker {
  pid_t pid = -1;
  std::string log;  // stdout and stderr
};

// argv[0] is the binary; `env` adds to (and overrides) this process's environment.
Worker spawn_worker(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                    const std::filesystem::path& log);

// Exit code (128 + signal when killed), or -1 after killing it with SIGKILL when it
// outlives the deadline.
int wait_worker(const Worker& worker, std::chrono::steady_clock::time_point deadline);

// torchrun's variables for `rank` of `world` meeting on 127.0.0.1:port.
std::map<std::string, std::string> rank_env(int rank, int world, int port);

std::string slurp(const std::filesystem::path& path);

// True while a process with this id exists (zombies included).
bool process_exists(pid_t pid);

}  // namespace sb::test
