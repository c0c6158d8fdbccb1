#pragma once
// A progress line with a rate and an estimated time to finish, for long evaluations:
// "120/2376 (5.1 %), 3.1/s, ETA 12m05s". Items done before this process started
// (resumed from disk) count toward the fraction but not toward the rate.

#include <chrono>
#include <cstdint>
#include <string>

namespace sb {

class ProgressEta {
 public:
  ProgressEta(int64_t total, int64_t already_done);
  // The line after `done` items in all (resumed ones included).
  std::string line(int64_t done) const;
  // True about every 5 % of the remaining items and for the last one: when to print.
  bool due(int64_t done) const;

 private:
  int64_t total_, start_done_, step_;
  std::chrono::steady_clock::time_point start_;
};

// "45s", "12m05s", "3h02m".
std::string format_duration(double seconds);

}  // namespace sb
