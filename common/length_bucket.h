#pragma once
// The power-of-two length bucket shared by every per-length estimate ([our rule],
// docs/sparsebalance.md): SAB's budget EMA, the DST floor's EMA and the latency
// calibration's factors. bucket(L) = floor(log2(L)) for L >= 1.

#include <cstdint>
#include <stdexcept>
#include <string>

namespace sb {

inline int64_t power_of_two_bucket(int64_t length) {
  if (length < 1) throw std::invalid_argument("length bucket: length must be >= 1, got " + std::to_string(length));
  int64_t bucket = 0;
  while ((length >> (bucket + 1)) > 0) ++bucket;
  return bucket;
}

}  // namespace sb
