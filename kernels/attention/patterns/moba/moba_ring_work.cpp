#include "kernels/attention/patterns/moba/moba_ring_work.h"

#include <stdexcept>
#include <string>

namespace sb {

double moba_block_keep_probability(int64_t budget, int64_t earlier) {
  if (budget <= 0 || earlier + 1 <= budget) return 1.0;
  return static_cast<double>(budget - 1) / static_cast<double>(earlier);
}

RingWork moba_ring_work(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets, int64_t cp,
                        const CpLayout& layout, int64_t block_size, int64_t query_heads) {
  if (lengths.size() != budgets.size()) {
    throw std::invalid_argument("moba_ring_work: " + std::to_string(lengths.size()) + " lengths but " +
                                std::to_string(budgets.size()) + " budgets");
  }
  return ring_block_work(lengths, cp, layout, block_size, query_heads, [&budgets](int64_t s, int64_t i) {
    return moba_block_keep_probability(budgets[static_cast<size_t>(s)], i);
  });
}

}  // namespace sb
