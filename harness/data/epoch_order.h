#pragma once
// The order in which a dataset of N conversations is visited: sample id i reads
// conversation order_e[i mod N] of epoch e = i / N, where order_e is a Fisher-Yates
// permutation from its own seeded stream per epoch (seed, e) when shuffling, the file
// order otherwise. Every rank computes the same order from the manifest seed.

#include <cstdint>
#include <mutex>
#include <vector>

namespace sb {

class EpochOrder {
 public:
  EpochOrder(int64_t seed, bool shuffle) : seed_(seed), shuffle_(shuffle) {}

  // The conversation (0 <= result < count) that sample `id` reads. Thread-safe.
  int64_t conversation_of(int64_t id, int64_t count) const;

 private:
  int64_t seed_;
  bool shuffle_;
  mutable std::mutex mutex_;
  mutable int64_t epoch_ = -1;  // the epoch `order_` holds
  mutable std::vector<int64_t> order_;
};

}  // namespace sb
