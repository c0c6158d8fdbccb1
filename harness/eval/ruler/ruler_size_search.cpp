#include "harness/eval/ruler/ruler_size_search.h"

#include <algorithm>

namespace sb {

int64_t ruler_binary_search(int64_t lower, int64_t upper, int64_t fallback, const std::function<bool(int64_t)>& fits) {
  int64_t best = -1;
  while (lower <= upper) {
    const int64_t mid = (lower + upper) / 2;
    if (fits(mid)) {
      best = mid;
      lower = mid + 1;
    } else {
      upper = mid - 1;
    }
  }
  return best >= 0 ? best : fallback;
}

int64_t ruler_search_upper(int64_t max_length, int64_t tokens_at_incremental, int64_t incremental) {
  const double per_unit = static_cast<double>(tokens_at_incremental) / static_cast<double>(incremental);
  return std::max(static_cast<int64_t>(static_cast<double>(max_length) / per_unit * 3), incremental * 2);
}

std::vector<RulerDraw> ruler_draw_samples(int64_t num_samples, int64_t size, int64_t incremental, int64_t max_length,
                                          const std::string& what,
                                          const std::function<RulerDraw(int64_t index, int64_t n)>& draw) {
  std::vector<RulerDraw> samples;
  for (int64_t index = 0; index < num_samples; ++index) {
    int64_t n = size;
    int64_t failures_at_floor = 0;
    while (true) {
      try {
        RulerDraw d = draw(index, n);
        if (d.length <= max_length) {
          samples.push_back(std::move(d));
          break;
        }
      } catch (const RulerRetry&) {
      }
      if (n > incremental) {
        n -= incremental;
      } else if (++failures_at_floor >= 1000) {
        throw RulerTooShort(what + ": no sample fits in " + std::to_string(max_length) +
                                    " tokens even at the smallest haystack");
      }
    }
  }
  return samples;
}

}  // namespace sb
