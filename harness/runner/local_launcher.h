#pragma once
// The local launcher: starts the ranks of a job as processes on this machine, the
// way torchrun would (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT, plus SB_LAUNCHER_PID), prints their output with a "[rank N] " prefix,
// and stops all of them on the first failure or on Ctrl-C (SIGINT/SIGTERM to the
// launcher): SIGTERM, then SIGKILL after a grace period. The ranks run in their own
// process group (a terminal's Ctrl-C reaches only the launcher, which stops them in
// order) and ask the kernel to kill them if the launcher itself dies
// (arm_parent_death_signal), so no rank outlives it.

#include <chrono>
#include <functional>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace sb {

struct LaunchOptions {
  int world_size = 1;
  std::vector<std::string> arguments;  // argv of every rank; [0] is the executable
  std::chrono::milliseconds grace{5000};
  std::function<std::string(int)> describe_rank = [](int r) { return "rank " + std::to_string(r); };
};

// Waits for every rank. Returns 0 when all exited 0; else 2 when the first failed rank
// exited 2 (a configuration error), 1 otherwise, after printing which rank failed
// and how to `log`.
int launch_local_ranks(const LaunchOptions& options, std::ostream& log);

// Whether this process is a rank the launcher started (SB_LAUNCHER_PID set): the launcher
// has then already checked the run (profiles, conflicts) and printed what it found.
bool started_by_local_launcher();

// In a rank started by the launcher (SB_LAUNCHER_PID set): dies with SIGKILL when the
// launcher does, and exits at once if the launcher is already gone. No-op otherwise.
void arm_parent_death_signal();


// A loopback TCP port that was free a moment ago: drawn at random from the 10000 ports
// below the kernel's ephemeral range (which bind(0) and outgoing connections use, so a
// released ephemeral port can be taken again before rank 0 binds it), checked by binding
// it and released; an ephemeral one from bind(0) only when none of 64 draws is free.
int free_loopback_port();

// This process's environment ("KEY=value" entries) with `overrides` set or replaced,
// for posix_spawn.
std::vector<std::string> environment_with(const std::map<std::string, std::string>& overrides);

}  // namespace sb
