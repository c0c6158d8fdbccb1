// The run-queue wait reader (harness/common/runqueue_wait.h) against the kernel's own
// accounting: threads that outnumber the cores must wait for one, so the process's
// total wait grows by a good part of the oversubscribed time.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <optional>
#include <vector>

#include "harness/common/runqueue_wait.h"

namespace sb {
namespace {

TEST(RunqueueWait, GrowsWhenThreadsOutnumberTheCores) {
  const std::optional<double> before = process_runqueue_wait_ms();
  if (!before) GTEST_SKIP() << "/proc/self/task/*/schedstat is not readable here";
  EXPECT_GE(*before, 0.0);

  // cores + 2 spinning threads for 300 ms: at any moment at least 2 of them are ready
  // without a core, so together they wait at least about 2 x 300 ms (the kernel
  // shares the cores, it does not let them idle). Checked against a quarter of that,
  // so that other load on a shared machine (which only adds waiting) cannot fail it.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const auto spin_for = std::chrono::milliseconds(300);
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  std::atomic<unsigned> spinning{0};
  for (unsigned t = 0; t < cores + 2; ++t) {
    spinners.emplace_back([&] {
      spinning.fetch_add(1);
      volatile unsigned long long sink = 0;
      while (!stop.load(std::memory_order_relaxed)) sink = sink + 1;
    });
  }
  std::this_thread::sleep_for(spin_for);
  // Read before the threads exit: an ended thread takes its counters with it.
  const std::optional<double> during = process_runqueue_wait_ms();
  stop = true;
  for (std::thread& t : spinners) t.join();
  ASSERT_TRUE(during.has_value());
  EXPECT_EQ(spinning.load(), cores + 2);
  EXPECT_GT(*during - *before, 0.25 * 2 * 300.0) << "cores " << cores;
}

}  // namespace
}  // namespace sb
