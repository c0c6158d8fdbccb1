#pragma once
// Makes a failure of one rank stop every rank within a bounded time, with a message
// that names the rank. A background thread per rank, on its own connection to the
// job's store:
//   - increments its heartbeat counter every `interval`;
//   - stops this process (message on stderr, exit 1) when another rank has published
//     a failure (report_failure), or when a peer's counter has not moved for `timeout`
//     (the peer is hung, stopped, or gone without a word), or when the store itself is
//     unreachable (rank 0, which serves it, is gone).
// A second thread keeps the first one honest: a store whose host dropped off the network
// sends no reset, and a store call can then block far beyond `timeout`; when the
// heartbeat thread has not completed a round with the store for `timeout`, this process
// stops naming the store (so a cut-off host's ranks stop too, not only the others). It
// also bounds report_failure: a failure the store does not take within `timeout` stops
// the process with that failure's message and exit code.
// A rank that dies by a signal publishes nothing; its peers then fail in their next
// collective (connection reset) or within `timeout` (no heartbeat), and
// silent_peers() names it in their message.

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace sb {

struct RankWatchdogOptions {
  std::chrono::milliseconds timeout{60000};
  std::chrono::milliseconds interval{500};  // heartbeat period
  std::string key_prefix = "sb/watchdog/";
  std::string store_address;                // "host:port", for the message when the store is lost
  std::function<std::string(int)> describe_rank = [](int r) { return "rank " + std::to_string(r); };
  // What to do when the job must stop, with the exit code (that of the failed rank's
  // error, e.g. 2 for a configuration error; 1 otherwise); default: print to stderr
  // and std::_Exit (the main thread may be blocked in a collective that only its
  // timeout would end).
  std::function<void(const std::string&, int)> on_fatal;
};

class RankWatchdog {
 public:
  RankWatchdog(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
               RankWatchdogOptions options);
  ~RankWatchdog();
  RankWatchdog(const RankWatchdog&) = delete;
  RankWatchdog& operator=(const RankWatchdog&) = delete;

  // Stops and joins the thread. Call on every rank before the job's final barrier, so
  // no rank reads the store after rank 0 stopped serving it.
  void stop();

  // This rank is failing with `message`: from now on, a store that stops answering for
  // `timeout` ends the process with this message and code (not the store's), so the
  // calls before report_failure (failure_of_another_rank, silent_peers) are bounded too.
  void begin_report(const std::string& message, int exit_code);

  // Publishes this rank's failure (the first published failure wins) and lingers for
  // two heartbeat periods so the others read it before this process exits. The
  // others exit with `exit_code`.
  void report_failure(const std::string& message, int exit_code);

  // The failure another rank published, as "<describe(rank)> failed: <message>".
  std::optional<std::string> failure_of_another_rank();

  // Ranks whose heartbeat did not advance during the next `window`; blocks for it.
  std::vector<int> silent_peers(std::chrono::milliseconds window);

 private:
  void run();
  void watch_store_contact();
  void fatal(const std::string& message, int exit_code);
  std::string key(const std::string& name) const { return options_.key_prefix + name; }

  c10::intrusive_ptr<c10d::Store> thread_store_;  // the watchdog thread's own connection
  c10::intrusive_ptr<c10d::Store> main_store_;    // used by report_failure / silent_peers
  int rank_, world_size_;
  RankWatchdogOptions options_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;  // the heartbeat thread ends (also once this rank reports its own failure)
  bool closed_ = false;    // the store-contact thread ends (stop(), fatal, a report published)
  bool fatal_called_ = false;  // on_fatal runs once per process, whichever thread gets there
  std::optional<std::pair<std::string, int>> reporting_;  // the failure being published
  // When the heartbeat thread last completed a round with the store (steady clock, ns).
  std::atomic<int64_t> last_contact_ns_{0};
  std::thread thread_, contact_thread_;
};

}  // namespace sb
