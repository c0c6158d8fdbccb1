#include "kernels/attention/patterns/moba/moba_coverage_model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace sb {

ZipfCoverageModel::ZipfCoverageModel(double exponent, int64_t block_size)
    : exponent_(exponent), block_size_(block_size) {
  if (!(exponent >= 0)) throw std::invalid_argument("ZipfCoverageModel: exponent must be >= 0");
  if (block_size < 1) throw std::invalid_argument("ZipfCoverageModel: block_size must be >= 1");
}

double ZipfCoverageModel::harmonic(int64_t n) const {
  while (static_cast<int64_t>(harmonic_.size()) <= n) {
    const auto j = static_cast<double>(harmonic_.size());
    harmonic_.push_back(harmonic_.back() + std::pow(j, -exponent_));
  }
  return harmonic_[static_cast<size_t>(n)];
}

double ZipfCoverageModel::coverage(int64_t length, int64_t budget) const {
  if (length < 1 || budget < 1) throw std::invalid_argument("ZipfCoverageModel: length and budget must be >= 1");
  const int64_t nb = blocks(length);
  const int64_t k = std::min(budget, nb);
  const auto key = std::make_pair(nb, k);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  double sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const int64_t n = i + 1;
    sum += harmonic(std::min(k, n)) / harmonic(n);
  }
  const double c = sum / static_cast<double>(nb);
  cache_[key] = c;
  return c;
}

int64_t ZipfCoverageModel::floor_budget(int64_t length, int64_t reference_k, double ratio) const {
  if (ratio <= 0) return 1;
  const double target = ratio * coverage(length, reference_k);
  for (int64_t k = 1; k < reference_k; ++k) {
    if (coverage(length, k) >= target) return k;
  }
  return reference_k;
}

int64_t ZipfCoverageModel::effective_budget(int64_t length, int64_t planned_k, int64_t reference_k,
                                            double ratio) const {
  if (ratio <= 0 || reference_k <= 0) return planned_k;
  return std::max(planned_k, floor_budget(length, reference_k, ratio));
}

}  // namespace sb
