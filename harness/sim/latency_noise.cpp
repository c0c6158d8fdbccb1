#include "harness/sim/latency_noise.h"

#include <cmath>
#include <stdexcept>

namespace sb {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// In (0, 1]: 53 random bits, never 0 (log below).
double unit_interval(uint64_t bits) { return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53; }

}  // namespace

double keyed_standard_normal(uint64_t key) {
  const uint64_t a = splitmix64(key);
  const uint64_t b = splitmix64(a);
  const double radius = std::sqrt(-2.0 * std::log(unit_interval(a)));
  return radius * std::cos(2.0 * M_PI * unit_interval(b));
}

LatencyNoise::LatencyNoise(double sigma, uint64_t seed) : sigma_(sigma), seed_(seed) {
  if (!(sigma >= 0) || !std::isfinite(sigma)) throw std::invalid_argument("LatencyNoise: sigma must be >= 0");
}

double LatencyNoise::factor(int64_t iteration, int64_t dp_rank, int64_t microbatch) const {
  if (sigma_ == 0) return 1.0;
  uint64_t key = splitmix64(seed_);
  for (int64_t part : {iteration, dp_rank, microbatch}) key = splitmix64(key ^ static_cast<uint64_t>(part));
  return std::exp(sigma_ * keyed_standard_normal(key));
}

}  // namespace sb
