// The watchdog over a real TCPStore, in one process: two "ranks" with callbacks in
// place of process exits. A rank that stops heartbeating is named after the timeout;
// a published failure reaches the other rank at once with its exit code; a lost store
// is reported as such; a store that stops answering without closing its connections
// (its host dropped off the network) stops the rank within the timeout, also while the
// rank is publishing its own failure.
#include <gtest/gtest.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <atomic>
#include <condition_variable>
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

// A store whose every call blocks, without an error, while the link is down (as over a
// TCP connection whose peer vanished: no reset, no answer) and goes on once it is up
// again. Clones share the link.
class UnpluggableStore : public c10d::Store {
 public:
  struct Link {
    std::mutex mutex;
    std::condition_variable changed;
    bool down = false;
    void set_down(bool value) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        down = value;
      }
      changed.notify_all();
    }
    void pass() {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [this] { return !down; });
    }
  };
  UnpluggableStore(c10::intrusive_ptr<c10d::Store> inner, std::shared_ptr<Link> link)
      : inner_(std::move(inner)), link_(std::move(link)) {}

  c10::intrusive_ptr<c10d::Store> clone() override { return c10::make_intrusive<UnpluggableStore>(inner_, link_); }
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    link_->pass();
    inner_->set(key, value);
  }
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& current,
                                  const std::vector<uint8_t>& value) override {
    link_->pass();
    return inner_->compareSet(key, current, value);
  }
  std::vector<uint8_t> get(const std::string& key) override {
    link_->pass();
    return inner_->get(key);
  }
  int64_t add(const std::string& key, int64_t value) override {
    link_->pass();
    return inner_->add(key, value);
  }
  bool deleteKey(const std::string& key) override {
    link_->pass();
    return inner_->deleteKey(key);
  }
  bool check(const std::vector<std::string>& keys) override {
    link_->pass();
    return inner_->check(keys);
  }
  int64_t getNumKeys() override {
    link_->pass();
    return inner_->getNumKeys();
  }
  void wait(const std::vector<std::string>& keys) override {
    link_->pass();
    inner_->wait(keys);
  }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    link_->pass();
    inner_->wait(keys, timeout);
  }

 private:
  c10::intrusive_ptr<c10d::Store> inner_;
  std::shared_ptr<Link> link_;
};

TEST(RankWatchdog, AStoreThatStopsAnsweringStopsTheRankWithinTheTimeout) {
  auto link = std::make_shared<UnpluggableStore::Link>();
  auto store = c10::make_intrusive<UnpluggableStore>(c10::make_intrusive<c10d::HashStore>(), link);
  Fatal other, fatal;
  auto rank0 = watchdog(store, 0, other, std::chrono::milliseconds(1000));
  auto rank1 = watchdog(store, 1, fatal, std::chrono::milliseconds(1000));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_FALSE(fatal.seen()) << fatal.message;  // the store answers: no alarm
  EXPECT_FALSE(other.seen()) << other.message;
  const auto unplugged = Clock::now();
  link->set_down(true);
  ASSERT_TRUE(wait_until([&] { return fatal.seen(); }, std::chrono::seconds(10)));
  const double after = std::chrono::duration<double>(fatal.when - unplugged).count();
  EXPECT_NE(fatal.message.find("has not answered"), std::string::npos) << fatal.message;
  EXPECT_NE(fatal.message.find("127.0.0.1:test"), std::string::npos) << fatal.message;
  EXPECT_EQ(fatal.code, 1);
  EXPECT_GE(after, 0.9);
  EXPECT_LT(after, 2.0);
  link->set_down(false);  // lets the blocked heartbeat calls return, so stop() can join them
  rank1->stop();
  rank0->stop();
}

TEST(RankWatchdog, AFailureTheStoreDoesNotTakeStopsTheRankWithItsOwnMessageAndCode) {
  auto link = std::make_shared<UnpluggableStore::Link>();
  auto store = c10::make_intrusive<UnpluggableStore>(c10::make_intrusive<c10d::HashStore>(), link);
  Fatal fatal;
  auto rank1 = watchdog(store, 1, fatal, std::chrono::milliseconds(1000));
  link->set_down(true);
  std::thread reporter([&] { rank1->report_failure("bad manifest: $.train.lr", 2); });
  ASSERT_TRUE(wait_until([&] { return fatal.seen(); }, std::chrono::seconds(10)));
  EXPECT_EQ(fatal.message.rfind("bad manifest: $.train.lr (not published", 0), 0u) << fatal.message;
  EXPECT_EQ(fatal.code, 2);
  link->set_down(false);
  reporter.join();
  rank1->stop();
}

// The calls a failing rank makes before publishing (is it a consequence of another
// rank's failure?) are bounded the same way, and end with the rank's own message.
TEST(RankWatchdog, AFailingRanksLookupsBeforeItsReportAreBoundedToo) {
  auto link = std::make_shared<UnpluggableStore::Link>();
  auto store = c10::make_intrusive<UnpluggableStore>(c10::make_intrusive<c10d::HashStore>(), link);
  Fatal fatal;
  auto rank1 = watchdog(store, 1, fatal, std::chrono::milliseconds(1000));
  link->set_down(true);
  rank1->begin_report("collective timed out", 1);
  std::thread lookup([&] { (void)rank1->failure_of_another_rank(); });
  ASSERT_TRUE(wait_until([&] { return fatal.seen(); }, std::chrono::seconds(10)));
  EXPECT_EQ(fatal.message.rfind("collective timed out (not published", 0), 0u) << fatal.message;
  EXPECT_EQ(fatal.code, 1);
  link->set_down(false);
  lookup.join();
  rank1->stop();
}

}  // namespace
}  // namespace sb
