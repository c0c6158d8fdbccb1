#pragma once
// A tiny counter-based random source whose outputs are fixed by the seed on every
// platform and standard library (std::uniform_int_distribution is not), so synthetic
// data and schedules reproduce bit for bit across machines.

#include <cstdint>

namespace sb {

// SplitMix64 (Steele, Lea, Flood 2014): a bijective 64-bit mixer used as a generator.
class DeterministicRng {
 public:
  explicit DeterministicRng(uint64_t seed) : state_(seed) {}
  // A generator for stream `stream` of `seed`: independent streams for, e.g., sample ids.
  static DeterministicRng for_stream(uint64_t seed, uint64_t stream);

  uint64_t next_u64();
  // Uniform in [0, bound), bound >= 1, without modulo bias.
  uint64_t uniform_below(uint64_t bound);
  // Uniform in [lo, hi] (inclusive).
  int64_t uniform_int(int64_t lo, int64_t hi);
  // Uniform in [0, 1) with 53 random bits.
  double uniform_unit();

 private:
  uint64_t state_;
};

}  // namespace sb
