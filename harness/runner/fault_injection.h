#pragma once
// Faults on purpose, for testing what a job does when one rank fails. Read from the
// environment variable SB_FAULT_INJECT, "<kind>:rank=<r>:iteration=<i>", and fired by
// rank r when iteration i starts:
//   crash  the process kills itself with SIGKILL (as the OOM killer would)
//   hang   the process stops itself with SIGSTOP (frozen: no heartbeat, no progress)
//   error  an exception ("injected failure") in the training loop
//   slow   "slow:rank=<r>:iteration=<i>:ms=<n>": the rank sleeps n ms before the
//          iteration, a slow peer whose delay the other ranks must time as wait
//          (scripts/gpu_check_wait.py checks it; docs/cluster.md)
//   nan    rank r's first trained parameter becomes NaN, so the iteration's loss and
//          gradient norm are not finite (train.nonfinite decides what follows)
// Unset (the normal case): nothing happens.

#include <cstdint>
#include <optional>
#include <string>

namespace sb {

class Trainer;

struct FaultInjection {
  std::string kind;
  int64_t rank = 0;
  int64_t iteration = 0;
  int64_t ms = 0;  // slow: the delay

  // Throws ConfigError naming SB_FAULT_INJECT when it is set but malformed.
  static std::optional<FaultInjection> from_environment();
  // trainer: the rank's (nan needs it).
  void fire_if_due(int64_t rank, int64_t iteration, Trainer* trainer = nullptr) const;
};

}  // namespace sb
