#include "harness/eval/ruler/ruler_size_search.h"

#include <algorithm>

namespace sb {

int64_t ruler_search_upper(int64_t max_length, int64_t tokens_at_incremental, int64_t incremental) {
  const double per_unit = static_cast<double>(tokens_at_incremental) / static_cast<double>(incremental);
  return std::max(static_cast<int64_t>(static_cast<double>(max_length) / per_unit * 3), incremental * 2);
}

std::vector<RulerDraw> ruler_sized_samples(int64_t num_samples, const RulerSizing& sizing,
                                           const std::function<int64_t(const std::string&)>& count_tokens,
                                           const std::function<std::string(int64_t n)>& probe,
                                           const std::function<RulerDraw(int64_t index, int64_t n)>& draw) {
  int64_t size = sizing.incremental;
  for (int64_t lower = sizing.incremental, upper = sizing.upper; lower <= upper;) {
    const int64_t mid = (lower + upper) / 2;
    if (count_tokens(probe(mid)) + sizing.extra_tokens + sizing.budget <= sizing.max_length) {
      size = mid;
      lower = mid + 1;
    } else {
      upper = mid - 1;
    }
  }
  std::vector<RulerDraw> samples;
  for (int64_t index = 0; index < num_samples; ++index) {
    int64_t n = size;
    int64_t failures_at_floor = 0;
    while (true) {
      try {
        RulerDraw d = draw(index, n);
        d.length = count_tokens(d.prompt) + sizing.budget;
        if (d.length <= sizing.max_length) {
          samples.push_back(std::move(d));
          break;
        }
      } catch (const RulerRetry&) {
      }
      if (n > sizing.incremental) {
        n -= sizing.incremental;
      } else if (++failures_at_floor >= 1000) {
        throw RulerTooShort(sizing.what + ": no sample fits in " + std::to_string(sizing.max_length) +
                            " tokens even at the smallest haystack");
      }
    }
  }
  return samples;
}

}  // namespace sb
