#include "harness/common/progress_eta.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sb {

ProgressEta::ProgressEta(int64_t total, int64_t already_done)
    : total_(total),
      start_done_(already_done),
      step_(std::max<int64_t>(1, (total - already_done) / 20)),
      start_(std::chrono::steady_clock::now()) {}

bool ProgressEta::due(int64_t done) const { return done == total_ || (done - start_done_) % step_ == 0; }

std::string ProgressEta::line(int64_t done) const {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const int64_t fresh = done - start_done_;
  char head[96];
  std::snprintf(head, sizeof(head), "%lld/%lld (%.1f %%)", static_cast<long long>(done),
                static_cast<long long>(total_), total_ > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0);
  std::string out = head;
  if (fresh > 0 && seconds > 0) {
    const double rate = static_cast<double>(fresh) / seconds;
    char tail[64];
    std::snprintf(tail, sizeof(tail), ", %.2f/s", rate);
    out += tail;
    if (done < total_) out += ", ETA " + format_duration(static_cast<double>(total_ - done) / rate);
  }
  return out;
}

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  char out[32];
  if (s < 60) {
    std::snprintf(out, sizeof(out), "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(out, sizeof(out), "%lldm%02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(out, sizeof(out), "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>((s % 3600) / 60));
  }
  return out;
}

}  // namespace sb
