#include "harness/eval/ruler/python_random.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <unordered_set>

namespace sb {

namespace {

// MT19937 parameters (Matsumoto & Nishimura, 1998).
constexpr int kShift = 397;
constexpr uint32_t kTwistMatrix = 0x9908b0dfu;
constexpr uint32_t kUpperBit = 0x80000000u;
constexpr uint32_t kLowerBits = 0x7fffffffu;

// Number of bits needed to write n, as Python's int.bit_length().
int bit_length(uint64_t n) {
  int bits = 0;
  while (n != 0) {
    ++bits;
    n >>= 1;
  }
  return bits;
}

// Smallest all-ones value >= max: numpy's gen_mask for its masked rejection sampling.
uint64_t all_ones_covering(uint64_t max) {
  uint64_t mask = max;
  for (int shift = 1; shift <= 32; shift <<= 1) mask |= mask >> shift;
  return mask;
}

}  // namespace

// ---------------------------------------------------------------- Mt19937

Mt19937 Mt19937::from_scalar_seed(uint32_t seed) {
  Mt19937 mt;
  mt.state_[0] = seed;
  for (int i = 1; i < kStateWords; ++i) {
    const uint32_t previous = mt.state_[i - 1];
    mt.state_[i] = 1812433253u * (previous ^ (previous >> 30)) + static_cast<uint32_t>(i);
  }
  mt.position_ = kStateWords;
  return mt;
}

Mt19937 Mt19937::from_key(const std::vector<uint32_t>& key) {
  if (key.empty()) throw std::invalid_argument("Mt19937::from_key: empty key");
  // init_by_array: start from a fixed scalar seed, then fold the key in over
  // max(624, key length) steps and scramble once more over 623 steps. Index 0 is
  // skipped in both passes (it is refreshed from the last word on wrap-around) and
  // finally set so the state is never all zero.
  Mt19937 mt = from_scalar_seed(19650218u);
  auto& s = mt.state_;
  const size_t key_length = key.size();
  int i = 1;
  size_t j = 0;
  for (size_t steps = std::max<size_t>(kStateWords, key_length); steps > 0; --steps) {
    const uint32_t previous = s[i - 1];
    s[i] = (s[i] ^ ((previous ^ (previous >> 30)) * 1664525u)) + key[j] + static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= kStateWords) {
      s[0] = s[kStateWords - 1];
      i = 1;
    }
    if (j >= key_length) j = 0;
  }
  for (int steps = kStateWords - 1; steps > 0; --steps) {
    const uint32_t previous = s[i - 1];
    s[i] = (s[i] ^ ((previous ^ (previous >> 30)) * 1566083941u)) - static_cast<uint32_t>(i);
    ++i;
    if (i >= kStateWords) {
      s[0] = s[kStateWords - 1];
      i = 1;
    }
  }
  s[0] = kUpperBit;
  mt.position_ = kStateWords;
  return mt;
}

void Mt19937::twist() {
  for (int i = 0; i < kStateWords; ++i) {
    const uint32_t joined = (state_[i] & kUpperBit) | (state_[(i + 1) % kStateWords] & kLowerBits);
    const uint32_t mixed = (joined >> 1) ^ ((joined & 1u) ? kTwistMatrix : 0u);
    state_[i] = state_[(i + kShift) % kStateWords] ^ mixed;
  }
  position_ = 0;
}

uint32_t Mt19937::next_u32() {
  if (position_ >= kStateWords) twist();
  uint32_t y = state_[position_++];
  // Tempering.
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

// ---------------------------------------------------------------- PythonRandom

namespace {

// CPython's random_seed for a non-negative int: its magnitude as 32-bit words, least
// significant first, with no trailing zero words except that 0 itself gives [0].
std::vector<uint32_t> python_seed_key(uint64_t seed) {
  std::vector<uint32_t> key{static_cast<uint32_t>(seed)};
  if ((seed >> 32) != 0) key.push_back(static_cast<uint32_t>(seed >> 32));
  return key;
}

}  // namespace

PythonRandom::PythonRandom(uint64_t seed) : mt_(Mt19937::from_key(python_seed_key(seed))) {}

uint32_t PythonRandom::next_u32() { return mt_.next_u32(); }

uint64_t PythonRandom::getrandbits(int k) {
  if (k < 0 || k > 64) throw std::invalid_argument("PythonRandom::getrandbits: k must be in [0, 64]");
  if (k == 0) return 0;
  if (k <= 32) return mt_.next_u32() >> (32 - k);
  // Two words, low one first; the high word keeps its top (k - 32) bits.
  const uint64_t low = mt_.next_u32();
  const uint64_t high = mt_.next_u32() >> (64 - k);
  return low | (high << 32);
}

std::array<uint64_t, 2> PythonRandom::getrandbits128() {
  const uint64_t low = getrandbits(64);
  const uint64_t high = getrandbits(64);
  return {low, high};
}

uint64_t PythonRandom::randbelow(uint64_t n) {
  if (n == 0) throw std::invalid_argument("PythonRandom::randbelow: n must be >= 1");
  // bit_length of n, not n - 1: a power of two n wastes half its draws, and n = 1
  // still draws, exactly as CPython 3.11 does.
  const int bits = bit_length(n);
  uint64_t r = getrandbits(bits);
  while (r >= n) r = getrandbits(bits);
  return r;
}

int64_t PythonRandom::randint(int64_t a, int64_t b) {
  if (b < a) throw std::invalid_argument("PythonRandom::randint: empty range (b < a)");
  const uint64_t width = static_cast<uint64_t>(b) - static_cast<uint64_t>(a) + 1;
  if (width == 0) throw std::invalid_argument("PythonRandom::randint: range wider than 2**64 - 1");
  return static_cast<int64_t>(static_cast<uint64_t>(a) + randbelow(width));
}

double PythonRandom::random() {
  const uint32_t high27 = mt_.next_u32() >> 5;
  const uint32_t low26 = mt_.next_u32() >> 6;
  return (high27 * 67108864.0 + low26) * (1.0 / 9007199254740992.0);
}

std::vector<size_t> PythonRandom::sample(size_t population, size_t k) {
  if (k > population) throw std::invalid_argument("PythonRandom::sample: sample larger than population");
  // CPython's estimate of when a k-element set outweighs an n-element list. The
  // float log matters only near powers of 4, which k * 3 never equals.
  uint64_t setsize = 21;
  if (k > 5) {
    const double exponent = std::ceil(std::log(static_cast<double>(k) * 3.0) / std::log(4.0));
    setsize = exponent >= 31 ? UINT64_MAX : setsize + (uint64_t{1} << (2 * static_cast<int>(exponent)));
  }
  std::vector<size_t> result;
  result.reserve(k);
  if (population <= setsize) {
    // Pool branch: unchosen items stay in pool[0, population - i); the chosen slot is
    // refilled from the pool's last live entry.
    std::vector<size_t> pool(population);
    for (size_t i = 0; i < population; ++i) pool[i] = i;
    for (size_t i = 0; i < k; ++i) {
      const size_t live = population - i;
      const size_t j = static_cast<size_t>(randbelow(live));
      result.push_back(pool[j]);
      pool[j] = pool[live - 1];
    }
  } else {
    // Set branch: draw from the whole population, redrawing repeats.
    std::unordered_set<size_t> selected;
    for (size_t i = 0; i < k; ++i) {
      size_t j = static_cast<size_t>(randbelow(population));
      while (selected.count(j) != 0) j = static_cast<size_t>(randbelow(population));
      selected.insert(j);
      result.push_back(j);
    }
  }
  return result;
}

std::vector<size_t> PythonRandom::choices(size_t population, size_t k) {
  const double n = static_cast<double>(population);
  std::vector<size_t> result;
  result.reserve(k);
  for (size_t i = 0; i < k; ++i) result.push_back(static_cast<size_t>(std::floor(random() * n)));
  return result;
}

std::string python_uuid4_string(PythonRandom& rng) {
  auto [low, high] = rng.getrandbits128();
  // uuid.UUID(..., version=4) in 128-bit terms: variant bits 62-63 := 10 and version
  // bits 76-79 := 0100; here bits 0-63 live in `low`, 64-127 in `high`.
  low = (low & ~(uint64_t{0xc000} << 48)) | (uint64_t{0x8000} << 48);
  high = (high & ~(uint64_t{0xf000})) | (uint64_t{4} << 12);
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(high),
                static_cast<unsigned long long>(low));
  const std::string h(hex, 32);
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" +
         h.substr(20, 12);
}

// ---------------------------------------------------------------- NumpyLegacyRandom

NumpyLegacyRandom::NumpyLegacyRandom(uint32_t seed) : mt_(Mt19937::from_scalar_seed(seed)) {}

uint32_t NumpyLegacyRandom::next_u32() { return mt_.next_u32(); }

uint64_t NumpyLegacyRandom::next_u64() {
  const uint64_t high = mt_.next_u32();
  const uint64_t low = mt_.next_u32();
  return (high << 32) | low;
}

int64_t NumpyLegacyRandom::randint(int64_t low, int64_t high) {
  if (high <= low) throw std::invalid_argument("NumpyLegacyRandom::randint: high <= low");
  // numpy works with an offset and an inclusive range in unsigned arithmetic; the
  // final sum wraps back into int64 exactly as its C code does.
  const uint64_t range = static_cast<uint64_t>(high) - 1 - static_cast<uint64_t>(low);
  const uint64_t offset = static_cast<uint64_t>(low);
  uint64_t value = 0;
  if (range == 0) {
    value = 0;
  } else if (range <= 0xFFFFFFFFu) {
    if (range == 0xFFFFFFFFu) {
      value = mt_.next_u32();
    } else {
      const uint32_t mask = static_cast<uint32_t>(all_ones_covering(range));
      do {
        value = mt_.next_u32() & mask;
      } while (value > range);
    }
  } else if (range == UINT64_MAX) {
    value = next_u64();
  } else {
    const uint64_t mask = all_ones_covering(range);
    do {
      value = next_u64() & mask;
    } while (value > range);
  }
  return static_cast<int64_t>(offset + value);
}

}  // namespace sb
