#include "harness/data/deterministic_rng.h"

#include <stdexcept>

namespace sb {
namespace {

uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

DeterministicRng DeterministicRng::for_stream(uint64_t seed, uint64_t stream) {
  return DeterministicRng(splitmix64_mix(seed ^ splitmix64_mix(stream + 0x9e3779b97f4a7c15ULL)));
}

uint64_t DeterministicRng::next_u64() {
  state_ += 0x9e3779b97f4a7c15ULL;
  return splitmix64_mix(state_);
}

uint64_t DeterministicRng::uniform_below(uint64_t bound) {
  if (bound == 0) throw std::invalid_argument("uniform_below: bound must be >= 1");
  // Reject the top partial copy of [0, bound) so every residue is equally likely.
  const uint64_t limit = UINT64_MAX - (UINT64_MAX % bound);
  uint64_t x;
  do {
    x = next_u64();
  } while (x >= limit);
  return x % bound;
}

int64_t DeterministicRng::uniform_int(int64_t lo, int64_t hi) {
  if (hi < lo) throw std::invalid_argument("uniform_int: hi < lo");
  return lo + static_cast<int64_t>(uniform_below(static_cast<uint64_t>(hi - lo) + 1));
}

double DeterministicRng::uniform_unit() {
  return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace sb
