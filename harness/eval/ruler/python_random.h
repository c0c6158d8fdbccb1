#pragma once
// Bit-exact replicas of the two random streams RULER's data generators draw from:
//
//   * Python's `random` module (CPython 3.11: Modules/_randommodule.c and
//     Lib/random.py), i.e. MT19937 seeded by init_by_array from the seed's 32-bit
//     words, plus the Python-level helpers built on top of it (randbelow, randint,
//     random, sample, choices, shuffle) and uuid4 strings made from getrandbits(128);
//   * numpy's global legacy RandomState (np.random.seed / np.random.randint): MT19937
//     seeded by init_genrand, with the legacy masked-rejection bounded integers.
//
// RULER seeds both with its --random_seed and then draws needles, keys, haystack
// orders and answer positions from them. Replaying the same draws in the same order
// lets `sparsebalance eval ruler` produce RULER's exact samples, given the same
// tokenizer and inputs, without running Python.
//
// Every method consumes the underlying 32-bit outputs exactly as its Python
// counterpart does (rejection loops included), so calls may be interleaved freely and
// the stream stays in step with Python's.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sb {

// The MT19937 generator both libraries share: 624 words of state, refilled ("twisted")
// in one pass every 624 outputs, tempered on the way out. Seeding differs between the
// libraries, so both seeders are provided and each library class picks its own.
class Mt19937 {
 public:
  static constexpr int kStateWords = 624;

  // init_genrand(s): numpy's np.random.seed(s) for a scalar 0 <= s < 2**32.
  static Mt19937 from_scalar_seed(uint32_t seed);
  // init_by_array(key): CPython's random.seed(n); key holds n's 32-bit words,
  // least significant first. key must not be empty.
  static Mt19937 from_key(const std::vector<uint32_t>& key);

  uint32_t next_u32();  // genrand_uint32

 private:
  Mt19937() = default;
  void twist();

  std::array<uint32_t, kStateWords> state_{};
  int position_ = kStateWords;  // next state word to temper; kStateWords => twist first
};

// random.Random as CPython 3.11 implements it (MT19937, init_by_array seeding).
class PythonRandom {
 public:
  // random.seed(n) for an int n >= 0: key = n's 32-bit words, least significant
  // first, with n = 0 giving the key [0].
  explicit PythonRandom(uint64_t seed);

  uint32_t next_u32();  // genrand_uint32, what getrandbits(32) returns

  // random.getrandbits(k) for 0 <= k <= 64 (k = 0 returns 0 and draws nothing).
  // Words are drawn least significant first; the last word keeps only its top
  // `remaining` bits (shifted right by 32 - remaining). Throws std::invalid_argument
  // outside that range.
  uint64_t getrandbits(int k);
  // {low 64 bits, high 64 bits} of random.getrandbits(128): four words, low first.
  std::array<uint64_t, 2> getrandbits128();

  // Random._randbelow_with_getrandbits(n): getrandbits(n.bit_length()) until the draw
  // is below n. n >= 1 (n = 1 still draws one word per try). Throws for n = 0.
  uint64_t randbelow(uint64_t n);
  // random.randint(a, b), both ends inclusive: a + randbelow(b - a + 1). Throws
  // std::invalid_argument when b < a or when the width b - a + 1 exceeds 2**64 - 1.
  int64_t randint(int64_t a, int64_t b);
  // random.random(): a = word >> 5, b = word >> 6, (a * 2**26 + b) / 2**53.
  double random();

  // The indices random.sample(range(population), k) returns, in order. CPython picks
  // between two algorithms by comparing population with
  //   setsize = 21 (+ 4 ** ceil(log(k * 3, 4)) when k > 5):
  // population <= setsize shrinks a pool with randbelow(population - i); otherwise
  // it redraws randbelow(population) until unseen. Both are replicated since they
  // consume the stream differently. Throws std::invalid_argument when k > population.
  std::vector<size_t> sample(size_t population, size_t k);
  // random.choices(range(population), k=k) without weights: floor(random() * n) each.
  std::vector<size_t> choices(size_t population, size_t k);
  // random.shuffle(x): for i in reversed(range(1, len(x))): swap x[i], x[randbelow(i + 1)].
  template <typename T>
  void shuffle(std::vector<T>& x) {
    for (size_t i = x.size(); i-- > 1;) {
      const size_t j = static_cast<size_t>(randbelow(i + 1));
      std::swap(x[i], x[j]);
    }
  }

 private:
  Mt19937 mt_;
};

// str(uuid.UUID(int=rng.getrandbits(128), version=4)): lowercase 8-4-4-4-12 hex, with
// the version nibble forced to 4 and the variant bits to 10 as Python's uuid does.
std::string python_uuid4_string(PythonRandom& rng);

// numpy.random.RandomState (legacy), as left by np.random.seed(seed) for
// 0 <= seed < 2**32 (init_genrand seeding).
class NumpyLegacyRandom {
 public:
  explicit NumpyLegacyRandom(uint32_t seed);

  uint32_t next_u32();  // the legacy stream's raw 32-bit output
  // Two 32-bit outputs, the first one as the high half (numpy's legacy next_uint64).
  uint64_t next_u64();

  // np.random.randint(low, high) (default int64 dtype): a value in [low, high). With
  // range = high - 1 - low, range 0 draws nothing, range 2**32 - 1 (or 2**64 - 1) is
  // one raw output, and otherwise raw outputs are masked to the smallest 2**b - 1
  // covering range and rejected while above it, 32-bit outputs for range < 2**32 and
  // 64-bit ones beyond. Throws std::invalid_argument when high <= low.
  int64_t randint(int64_t low, int64_t high);

 private:
  Mt19937 mt_;
};

}  // namespace sb
