#include "harness/sim/latency_noise.h"

#include <cmath>
#include <initializer_list>
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

// Chains the parts into one key, starting from `domain` (distinct domains give
// independent draws for the same parts).
uint64_t chained_key(uint64_t domain, std::initializer_list<int64_t> parts) {
  uint64_t key = splitmix64(domain);
  for (int64_t part : parts) key = splitmix64(key ^ static_cast<uint64_t>(part));
  return key;
}

// The rank term's domain: any constant that no seed's micro-batch chain starts from in
// practice (the micro-batch term's domain is the seed itself, as before this term existed).
constexpr uint64_t kRankDomainSalt = 0x52414E4B5F4E4F49ULL;  // "RANK_NOI"

}  // namespace

double keyed_standard_normal(uint64_t key) {
  const uint64_t a = splitmix64(key);
  const uint64_t b = splitmix64(a);
  const double radius = std::sqrt(-2.0 * std::log(unit_interval(a)));
  return radius * std::cos(2.0 * M_PI * unit_interval(b));
}

LatencyNoise::LatencyNoise(double sigma, double rank_sigma, uint64_t seed)
    : sigma_(sigma), rank_sigma_(rank_sigma), seed_(seed) {
  if (!(sigma >= 0) || !std::isfinite(sigma)) throw std::invalid_argument("LatencyNoise: sigma must be >= 0");
  if (!(rank_sigma >= 0) || !std::isfinite(rank_sigma)) {
    throw std::invalid_argument("LatencyNoise: rank_sigma must be >= 0");
  }
}

double LatencyNoise::factor(int64_t iteration, int64_t dp_rank, int64_t microbatch) const {
  double log_factor = 0;
  if (sigma_ > 0) log_factor += sigma_ * keyed_standard_normal(chained_key(seed_, {iteration, dp_rank, microbatch}));
  if (rank_sigma_ > 0) {
    log_factor += rank_sigma_ * keyed_standard_normal(chained_key(seed_ ^ kRankDomainSalt, {iteration, dp_rank}));
  }
  return std::exp(log_factor);  // exactly 1 when both terms are off
}

}  // namespace sb
