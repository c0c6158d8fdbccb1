#include "harness/parallel/rank_watchdog.h"

#include "harness/parallel/error_text.h"

#include <cstdlib>
#include <iostream>

namespace sb {
namespace {

using Clock = std::chrono::steady_clock;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

std::string to_string(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

}  // namespace

RankWatchdog::RankWatchdog(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
                           RankWatchdogOptions options)
    : thread_store_(store->clone()),
      main_store_(store->clone()),
      rank_(rank),
      world_size_(world_size),
      options_(std::move(options)) {
  if (!options_.on_fatal) {
    options_.on_fatal = [](const std::string& message, int exit_code) {
      std::cerr << "error: " << message << std::endl;
      std::_Exit(exit_code);
    };
  }
  thread_store_->setTimeout(options_.timeout);
  main_store_->setTimeout(options_.timeout);
  last_contact_ns_ = now_ns();
  thread_ = std::thread([this] { run(); });
  contact_thread_ = std::thread([this] { watch_store_contact(); });
}

RankWatchdog::~RankWatchdog() { stop(); }

void RankWatchdog::stop() {
  // The heartbeat thread first, while the contact thread still bounds a store call it may
  // be blocked in; then the contact thread.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
  }
  wake_.notify_all();
  if (contact_thread_.joinable()) contact_thread_.join();
}

void RankWatchdog::fatal(const std::string& message, int exit_code) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fatal_called_) return;
    fatal_called_ = true;
  }
  options_.on_fatal(message, exit_code);
  // on_fatal returned (a test's callback): end the threads quietly.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    closed_ = true;
  }
  wake_.notify_all();
}

void RankWatchdog::watch_store_contact() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!closed_) {
    wake_.wait_for(lock, options_.interval, [this] { return closed_; });
    if (closed_) return;
    const auto silent = std::chrono::nanoseconds(now_ns() - last_contact_ns_.load());
    if (silent <= options_.timeout) continue;
    const std::string seconds = std::to_string(std::chrono::duration_cast<std::chrono::seconds>(silent).count());
    std::string message = "stopping: the job's rendezvous store at " + options_.store_address +
                          ", which rank 0 serves, has not answered for " + seconds +
                          " s (the timeout): this host lost its network or rank 0's host is gone";
    int code = 1;
    if (reporting_) {  // this rank's own failure, which the store did not take
      message = reporting_->first + " (not published to the other ranks: the store at " + options_.store_address +
                " did not answer within " + seconds + " s)";
      code = reporting_->second;
    }
    lock.unlock();
    fatal(message, code);
    return;
  }
}

void RankWatchdog::run() {
  std::vector<int64_t> last_count(static_cast<size_t>(world_size_), -1);
  std::vector<Clock::time_point> last_change(static_cast<size_t>(world_size_), Clock::now());
  const std::string failure_key = key("failure");
  try {
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (stopping_) return;
      }
      thread_store_->add(key("heartbeat/" + std::to_string(rank_)), 1);
      last_contact_ns_ = now_ns();  // every answered call counts: a slow round is not a lost store
      if (thread_store_->check({failure_key})) {
        // "<rank>:<exit code>:<message>"
        const std::string failure = to_string(thread_store_->get(failure_key));
        const size_t first = failure.find(':'), second = failure.find(':', first + 1);
        const int who = std::atoi(failure.substr(0, first).c_str());
        const int code = std::atoi(failure.substr(first + 1, second - first - 1).c_str());
        if (who != rank_) {
          fatal("stopping: " + options_.describe_rank(who) + " failed: " + failure.substr(second + 1),
                code == 2 ? 2 : 1);
          return;
        }
      }
      const auto now = Clock::now();
      for (int peer = 0; peer < world_size_; ++peer) {
        if (peer == rank_) continue;
        const int64_t count = thread_store_->add(key("heartbeat/" + std::to_string(peer)), 0);
        last_contact_ns_ = now_ns();
        const auto p = static_cast<size_t>(peer);
        if (count != last_count[p]) {
          last_count[p] = count;
          last_change[p] = now;
        } else if (now - last_change[p] > options_.timeout) {
          const auto silent_s = std::chrono::duration<double>(now - last_change[p]).count();
          fatal("stopping: " + options_.describe_rank(peer) + " sent no heartbeat for " +
                std::to_string(static_cast<int>(silent_s)) +
                " s (the timeout): it hangs, was stopped, or lost its network", 1);
          return;
        }
      }
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, options_.interval, [this] { return stopping_; });
    }
  } catch (const std::exception& e) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
    }
    fatal("stopping: lost the job's rendezvous store at " + options_.store_address +
          ", which rank 0 serves: rank 0 exited or the network failed (" + error_text(e) + ")", 1);
  }
}

void RankWatchdog::begin_report(const std::string& message, int exit_code) {
  std::lock_guard<std::mutex> lock(mutex_);
  reporting_ = std::make_pair(message, exit_code);
  last_contact_ns_ = now_ns();
}

void RankWatchdog::report_failure(const std::string& message, int exit_code) {
  {
    // This rank is going down with its own message; the thread must not add another
    // (e.g. "lost the store" when rank 0 exits first). The contact thread bounds the
    // store calls below.
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    reporting_ = std::make_pair(message, exit_code);
    last_contact_ns_ = now_ns();
  }
  try {
    main_store_->compareSet(key("failure"), {}, [&] {
      const std::string text = std::to_string(rank_) + ":" + std::to_string(exit_code) + ":" + message;
      return std::vector<uint8_t>(text.begin(), text.end());
    }());
    std::this_thread::sleep_for(2 * options_.interval);
  } catch (const std::exception&) {
    // The store is gone too; the caller reports the failure locally anyway.
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
  }
  wake_.notify_all();
}

std::optional<std::string> RankWatchdog::failure_of_another_rank() {
  try {
    if (!main_store_->check({key("failure")})) return std::nullopt;
    const std::string failure = to_string(main_store_->get(key("failure")));
    const size_t first = failure.find(':'), second = failure.find(':', first + 1);
    const int who = std::atoi(failure.substr(0, first).c_str());
    if (who == rank_) return std::nullopt;
    return options_.describe_rank(who) + " failed: " + failure.substr(second + 1);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::vector<int> RankWatchdog::silent_peers(std::chrono::milliseconds window) {
  std::vector<int> silent;
  try {
    std::vector<int64_t> before;
    for (int peer = 0; peer < world_size_; ++peer) {
      before.push_back(main_store_->add(key("heartbeat/" + std::to_string(peer)), 0));
    }
    std::this_thread::sleep_for(window);
    for (int peer = 0; peer < world_size_; ++peer) {
      if (peer == rank_) continue;
      if (main_store_->add(key("heartbeat/" + std::to_string(peer)), 0) == before[static_cast<size_t>(peer)]) {
        silent.push_back(peer);
      }
    }
  } catch (const std::exception&) {
    if (rank_ != 0) silent.push_back(0);  // the store died with rank 0
  }
  return silent;
}

}  // namespace sb
