#include "harness/common/runqueue_wait.h"

#include <filesystem>
#include <fstream>
#include <system_error>

namespace sb {

std::optional<double> process_runqueue_wait_ms() {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::directory_iterator tasks("/proc/self/task", error);
  if (error) return std::nullopt;
  double total_ns = 0;
  bool any = false;
  // Threads start and end while the list is read: a failed step ends the reading (what
  // was summed so far is a lower bound) rather than throwing mid-training.
  while (tasks != fs::directory_iterator()) {
    // Fields: time on a CPU (ns), time waiting on a run queue (ns), time slices run.
    std::ifstream in(tasks->path() / "schedstat");
    unsigned long long on_cpu_ns = 0, waiting_ns = 0;
    if (in >> on_cpu_ns >> waiting_ns) {
      total_ns += static_cast<double>(waiting_ns);
      any = true;
    }  // else: the thread ended while we listed it
    tasks.increment(error);
    if (error) break;
  }
  if (!any) return std::nullopt;
  return total_ns / 1e6;
}

}  // namespace sb
