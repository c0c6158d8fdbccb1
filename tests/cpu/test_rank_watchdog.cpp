// The watchdog over a real TCPStore, in one process: two "ranks" with callbacks in
// place of process exits. A rank that stops heartbeating is named after the timeout;
// a published failure reaches the other rank at once with its exit code; a lost store
// is reported as such.
#include <gtest/gtest.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <atomic>
#include <mutex>
#include <thread>

#include "harness/parallel/rank_watchdog.h"
#include "tests/support/free_tcp_port.h"

namespace sb {
namespace {

using Clock = std::chrono::steady_clock;

struct Fatal {
  std::mutex mutex;
  std::string message;
  int code = 0;
  Clock::time_point when;
  bool seen() {
    std::lock_guard<std::mutex> lock(mutex);
    return !message.empty();
  }
};

c10::intrusive_ptr<c10d::Store> server_store(int port) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = std::chrono::seconds(10);
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
}

std::unique_ptr<RankWatchdog> watchdog(const c10::intrusive_ptr<c10d::Store>& store, int rank, Fatal& fatal,
                                       std::chrono::milliseconds timeout) {
  RankWatchdogOptions options;
  options.timeout = timeout;
  options.interval = std::chrono::milliseconds(100);
  options.key_prefix = "test/";
  options.store_address = "127.0.0.1:test";
  options.on_fatal = [&fatal](const std::string& message, int code) {
    std::lock_guard<std::mutex> lock(fatal.mutex);
    if (!fatal.message.empty()) return;
    fatal.message = message;
    fatal.code = code;
    fatal.when = Clock::now();
  };
  return std::make_unique<RankWatchdog>(store, rank, 2, options);
}

bool wait_until(const std::function<bool()>& done, std::chrono::seconds limit) {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST(RankWatchdog, SilentRankIsNamedAfterTheTimeout) {
  auto store = server_store(test::free_tcp_port());
  Fatal a, b;
  auto rank0 = watchdog(store, 0, a, std::chrono::milliseconds(1000));
  auto rank1 = watchdog(store, 1, b, std::chrono::milliseconds(1000));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_FALSE(a.seen()) << a.message;  // both alive: longer than the timeout, no alarm
  const auto silenced = Clock::now();
  rank1->stop();  // rank 1 goes quiet
  ASSERT_TRUE(wait_until([&] { return a.seen(); }, std::chrono::seconds(10)));
  const double after = std::chrono::duration<double>(a.when - silenced).count();
  EXPECT_NE(a.message.find("rank 1 sent no heartbeat"), std::string::npos) << a.message;
  EXPECT_EQ(a.code, 1);
  EXPECT_GE(after, 0.9);
  EXPECT_LT(after, 2.0);
  rank0->stop();
}

TEST(RankWatchdog, PublishedFailureReachesTheOtherRankWithItsExitCode) {
  auto store = server_store(test::free_tcp_port());
  Fatal a, b;
  auto rank0 = watchdog(store, 0, a, std::chrono::seconds(30));
  auto rank1 = watchdog(store, 1, b, std::chrono::seconds(30));
  EXPECT_FALSE(rank0->failure_of_another_rank());
  rank1->report_failure("bad manifest: $.train.lr", 2);
  ASSERT_TRUE(wait_until([&] { return a.seen(); }, std::chrono::seconds(5)));
  EXPECT_EQ(a.message, "stopping: rank 1 failed: bad manifest: $.train.lr");
  EXPECT_EQ(a.code, 2);
  EXPECT_EQ(rank0->failure_of_another_rank(), std::optional<std::string>("rank 1 failed: bad manifest: $.train.lr"));
  EXPECT_FALSE(b.seen()) << "a rank does not stop itself over its own failure";
  rank0->stop();
  rank1->stop();
}

TEST(RankWatchdog, LostStoreIsReported) {
  auto store = server_store(test::free_tcp_port());
  Fatal b;
  auto rank1 = watchdog(store, 1, b, std::chrono::seconds(30));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  store.reset();  // rank 0's process (and the store it serves) goes away
  ASSERT_TRUE(wait_until([&] { return b.seen(); }, std::chrono::seconds(20)));
  EXPECT_NE(b.message.find("lost the job's rendezvous store"), std::string::npos) << b.message;
  rank1->stop();
}

}  // namespace
}  // namespace sb
