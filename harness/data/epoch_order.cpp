#include "harness/data/epoch_order.h"

#include <numeric>
#include <stdexcept>

#include "harness/data/deterministic_rng.h"

namespace sb {

int64_t EpochOrder::conversation_of(int64_t id, int64_t count) const {
  if (id < 0 || count <= 0) throw std::invalid_argument("EpochOrder: need id >= 0 and count > 0");
  const int64_t epoch = id / count;
  if (!shuffle_) return id % count;
  std::lock_guard<std::mutex> lock(mutex_);
  if (epoch_ != epoch || static_cast<int64_t>(order_.size()) != count) {
    order_.resize(static_cast<size_t>(count));
    std::iota(order_.begin(), order_.end(), 0);
    DeterministicRng rng = DeterministicRng::for_stream(static_cast<uint64_t>(seed_) ^ 0x6a736f6e6cULL,
                                                        static_cast<uint64_t>(epoch));
    for (int64_t i = count - 1; i > 0; --i) {
      const auto j = static_cast<int64_t>(rng.uniform_below(static_cast<uint64_t>(i + 1)));
      std::swap(order_[static_cast<size_t>(i)], order_[static_cast<size_t>(j)]);
    }
    epoch_ = epoch;
  }
  return order_[static_cast<size_t>(id % count)];
}

}  // namespace sb
