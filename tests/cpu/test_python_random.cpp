// The C++ replicas of Python's `random` and numpy's legacy RandomState against values
// taken from the real libraries. Every expected constant below is what CPython 3.11's
// `random` (random.Random(seed), or the module functions after random.seed(seed)) or
// numpy 2.4's legacy RandomState (after np.random.seed(seed)) returned for the stated
// seed and call sequence; each list is one stream unless a comment says otherwise.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/eval/ruler/python_random.h"

namespace sb {
namespace {

using Indices = std::vector<size_t>;
constexpr uint64_t kLargeSeed = (uint64_t{1} << 40) + 7;  // a two-word init_by_array key

std::vector<uint32_t> first_words(PythonRandom rng, int count) {
  std::vector<uint32_t> words;
  for (int i = 0; i < count; ++i) words.push_back(rng.next_u32());
  return words;
}

// [random.getrandbits(32) for _ in range(6)] after random.seed(seed).
TEST(PythonRandom, FirstWordsMatchCPythonSeeding) {
  EXPECT_EQ(first_words(PythonRandom(42), 6),
            (std::vector<uint32_t>{2746317213u, 478163327u, 107420369u, 3184935163u, 1181241943u, 1051802512u}));
  EXPECT_EQ(first_words(PythonRandom(0), 6),
            (std::vector<uint32_t>{3626764237u, 1654615998u, 3255389356u, 3823568514u, 1806341205u, 173879092u}));
  EXPECT_EQ(first_words(PythonRandom(kLargeSeed), 6),
            (std::vector<uint32_t>{2635837658u, 3209733218u, 3500038837u, 4028389051u, 4058793509u, 2746733121u}));
}

// [random.getrandbits(k) for k in (1, 5, 32, 33, 64) * 2], one stream per seed.
TEST(PythonRandom, GetrandbitsSplitsWordsLikeCPython) {
  const std::array<int, 10> widths{1, 5, 32, 33, 64, 1, 5, 32, 33, 64};
  const std::array<uint64_t, 10> seed42{1u, 3u, 107420369u, 3184935163u, 4117511471858006928u,
                                        0u, 23u, 440213415u, 7201369453u, 10060236952204337488u};
  const std::array<uint64_t, 10> seed_large{1u, 23u, 3500038837u, 8323356347u, 10521851240000246337u,
                                            1u, 15u, 1077368710u, 8367168749u, 9533546320589143255u};
  PythonRandom rng42(42);
  PythonRandom rng_large(kLargeSeed);
  for (size_t i = 0; i < widths.size(); ++i) {
    EXPECT_EQ(rng42.getrandbits(widths[i]), seed42[i]) << "call " << i << ", k=" << widths[i];
    EXPECT_EQ(rng_large.getrandbits(widths[i]), seed_large[i]) << "call " << i << ", k=" << widths[i];
  }
  EXPECT_EQ(PythonRandom(42).getrandbits(0), 0u);
  EXPECT_THROW(PythonRandom(42).getrandbits(65), std::invalid_argument);
}

// [random.getrandbits(128) for _ in range(2)] for seed 42, as {low 64, high 64}.
TEST(PythonRandom, Getrandbits128) {
  PythonRandom rng(42);
  EXPECT_EQ(rng.getrandbits128(), (std::array<uint64_t, 2>{0x1c80317fa3b1799dull, 0xbdd640fb06671ad1ull}));
  EXPECT_EQ(rng.getrandbits128(), (std::array<uint64_t, 2>{0x3eb13b9046685257ull, 0x23b8c1e9392456deull}));
}

std::vector<uint64_t> randbelow_draws(uint64_t n) {
  PythonRandom rng(42);
  std::vector<uint64_t> draws;
  for (int i = 0; i < 6; ++i) draws.push_back(rng.randbelow(n));
  return draws;
}

// [random._randbelow(n) for _ in range(6)], a fresh seed-42 stream per n.
TEST(PythonRandom, RandbelowRejectsLikeCPython) {
  EXPECT_EQ(randbelow_draws(1), (std::vector<uint64_t>{0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(randbelow_draws(7), (std::vector<uint64_t>{5, 0, 0, 5, 2, 1}));
  EXPECT_EQ(randbelow_draws((uint64_t{1} << 31) + 3),
            (std::vector<uint64_t>{478163327, 107420369, 1181241943, 1051802512, 958682846, 599310825}));
  EXPECT_EQ(randbelow_draws(1000000000000ull),
            (std::vector<uint64_t>{123005401501ull, 811856239313ull, 267469214295ull, 151282538206ull,
                                   114832269481ull, 814655221101ull}));
  // n = 1 still draws getrandbits(1) until it is 0; getrandbits(32) after the six
  // calls above shows how many words they spent.
  PythonRandom rng(42);
  for (int i = 0; i < 6; ++i) rng.randbelow(1);
  EXPECT_EQ(rng.next_u32(), 3163119785u);
  EXPECT_THROW(PythonRandom(42).randbelow(0), std::invalid_argument);
}

std::vector<int64_t> randint_draws(uint64_t seed, int64_t a, int64_t b, int count) {
  PythonRandom rng(seed);
  std::vector<int64_t> draws;
  for (int i = 0; i < count; ++i) draws.push_back(rng.randint(a, b));
  return draws;
}

// [random.randint(a, b) for _ in range(8)].
TEST(PythonRandom, Randint) {
  EXPECT_EQ(randint_draws(42, 1000000, 9999999, 8),
            (std::vector<int64_t>{2867825, 1419610, 5614226, 5108603, 4744854, 3341057, 2719583, 2458591}));
  EXPECT_EQ(randint_draws(0, 1000000, 9999999, 8),
            (std::vector<int64_t>{7463343, 8056020, 1679215, 5343902, 9577766, 9152513, 7793667, 6088743}));
  EXPECT_EQ(randint_draws(kLargeSeed, 1000000, 9999999, 8),
            (std::vector<int64_t>{8984681, 5208471, 3126524, 9670709, 7295984, 9746563, 7092714, 7596458}));
  EXPECT_EQ(randint_draws(42, -5, 5, 8), (std::vector<int64_t>{5, -4, -5, -1, -2, -2, -3, -4}));
  EXPECT_THROW(PythonRandom(42).randint(3, 2), std::invalid_argument);
}

// [random.random() for _ in range(5)]; repr() round-trips, so equality is exact.
TEST(PythonRandom, RandomFloat) {
  PythonRandom rng42(42);
  for (double expected : {0.6394267984578837, 0.025010755222666936, 0.27502931836911926, 0.22321073814882275,
                          0.7364712141640124}) {
    EXPECT_EQ(rng42.random(), expected);
  }
  PythonRandom rng0(0);
  for (double expected :
       {0.8444218515250481, 0.7579544029403025, 0.420571580830845, 0.25891675029296335, 0.5112747213686085}) {
    EXPECT_EQ(rng0.random(), expected);
  }
}

// random.Random(seed).sample(range(population), k), then getrandbits(32) from the same
// stream, which shows the sample consumed exactly as many words as CPython's.
void expect_sample(uint64_t seed, size_t population, size_t k, const Indices& expected, uint32_t next_word) {
  PythonRandom rng(seed);
  EXPECT_EQ(rng.sample(population, k), expected) << "sample(range(" << population << "), " << k << ")";
  EXPECT_EQ(rng.next_u32(), next_word) << "after sample(range(" << population << "), " << k << ")";
}

TEST(PythonRandom, SampleSmallPopulationUsesPool) {
  expect_sample(42, 10, 3, {1, 0, 4}, 1051802512u);
  // k = 40 > 5: setsize = 21 + 4**4 = 277 >= 40, still the pool.
  expect_sample(42, 40, 40,
                {7,  1,  17, 15, 14, 8,  6,  5,  27, 38, 0,  2,  33, 39, 16, 19, 29, 37, 31, 20,
                 22, 13, 26, 35, 34, 12, 18, 23, 28, 21, 32, 4,  11, 30, 24, 25, 36, 10, 3,  9},
                3639960595u);
  EXPECT_THROW(PythonRandom(42).sample(3, 4), std::invalid_argument);
  EXPECT_TRUE(PythonRandom(42).sample(5, 0).empty());
}

TEST(PythonRandom, SampleLargePopulationUsesSet) {
  // setsize = 277 < 1000.
  expect_sample(42, 1000, 40,
                {654, 114, 25,  759, 281, 250, 228, 142, 754, 104, 692, 758, 913, 558, 89,  604, 432, 32,  30,  95,
                 223, 238, 517, 616, 27,  574, 203, 733, 665, 718, 429, 225, 459, 603, 284, 828, 890, 6,   777, 825},
                685731524u);
}

// Seeds chosen so the pool and set algorithms give different answers on each side of
// the threshold: 21 (k <= 5) and 21 + 4**ceil(log(18, 4)) = 85 (k = 6).
TEST(PythonRandom, SampleBranchThresholds) {
  expect_sample(2, 21, 5, {1, 2, 19, 11, 5}, 3160967032u);         // pool
  expect_sample(2, 22, 5, {1, 2, 11, 5, 21}, 3667190760u);         // set
  expect_sample(5, 85, 6, {79, 32, 45, 67, 3, 59}, 3332716663u);   // pool
  expect_sample(2, 86, 6, {7, 11, 10, 46, 21, 85}, 3667190760u);   // set
}

// random.Random(seed).choices(range(26), k=5).
TEST(PythonRandom, Choices) {
  EXPECT_EQ(PythonRandom(42).choices(26, 5), (Indices{16, 0, 7, 5, 19}));
  EXPECT_EQ(PythonRandom(0).choices(26, 5), (Indices{21, 19, 10, 6, 13}));
}

// x = list(range(10)); random.Random(42).shuffle(x).
TEST(PythonRandom, Shuffle) {
  std::vector<int> x{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  PythonRandom rng(42);
  rng.shuffle(x);
  EXPECT_EQ(x, (std::vector<int>{7, 3, 2, 8, 5, 6, 9, 4, 0, 1}));
}

// [str(uuid.UUID(int=r.getrandbits(128), version=4)) for _ in range(3)], seed 42.
TEST(PythonRandom, Uuid4Strings) {
  PythonRandom rng(42);
  EXPECT_EQ(python_uuid4_string(rng), "bdd640fb-0667-4ad1-9c80-317fa3b1799d");
  EXPECT_EQ(python_uuid4_string(rng), "23b8c1e9-3924-46de-beb1-3b9046685257");
  EXPECT_EQ(python_uuid4_string(rng), "bd9c66b3-ad3c-4d6d-9a3d-1fa7bc8960a9");
}

// One seed-42 stream, in this order: 3 x randint(10**6, 10**7 - 1),
// sample(range(1000), 10), shuffle(list(range(10))), choices(range(26), k=4),
// random(), a uuid4, sample(range(30), 7), getrandbits(32).
TEST(PythonRandom, InterleavedCallsShareOneStream) {
  PythonRandom rng(42);
  EXPECT_EQ(rng.randint(1000000, 9999999), 2867825);
  EXPECT_EQ(rng.randint(1000000, 9999999), 1419610);
  EXPECT_EQ(rng.randint(1000000, 9999999), 5614226);
  EXPECT_EQ(rng.sample(1000, 10), (Indices{250, 228, 142, 754, 104, 692, 758, 913, 558, 89}));
  std::vector<int> x{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  rng.shuffle(x);
  EXPECT_EQ(x, (std::vector<int>{3, 5, 2, 4, 1, 8, 7, 0, 6, 9}));
  EXPECT_EQ(rng.choices(26, 4), (Indices{14, 18, 18, 10}));
  EXPECT_EQ(rng.random(), 0.4492090462838536);
  EXPECT_EQ(python_uuid4_string(rng), "01a9e71f-de8a-474b-8f36-d58b47378190");
  EXPECT_EQ(rng.sample(30, 7), (Indices{24, 25, 5, 22, 13, 10, 8}));
  EXPECT_EQ(rng.next_u32(), 667779376u);
}

std::vector<int64_t> numpy_draws(uint32_t seed, int64_t low, int64_t high, int count) {
  NumpyLegacyRandom rng(seed);
  std::vector<int64_t> draws;
  for (int i = 0; i < count; ++i) draws.push_back(rng.randint(low, high));
  return draws;
}

// np.random.seed(seed); [np.random.randint(low, high) for _ in range(count)].
TEST(NumpyLegacyRandom, RandintMaskedRejection) {
  EXPECT_EQ(numpy_draws(42, 10000, 99999, 8),
            (std::vector<int64_t>{25795, 10860, 86820, 64886, 16265, 92386, 47194, 97498}));
  EXPECT_EQ(numpy_draws(0, 10000, 99999, 8),
            (std::vector<int64_t>{78268, 53567, 52613, 55891, 31243, 51993, 96293, 65026}));
  EXPECT_EQ(numpy_draws(4294967295u, 10000, 99999, 4), (std::vector<int64_t>{37043, 26674, 54103, 24260}));
  EXPECT_THROW(NumpyLegacyRandom(42).randint(5, 5), std::invalid_argument);
}

// randint(0, 2**32 - 1) masks with 0xFFFFFFFF and rejects only 2**32 - 1, while
// randint(0, 2**32) takes raw words: for seed 42 neither rejects in these draws, so
// both show the raw stream.
TEST(NumpyLegacyRandom, RandintAtThe32BitEdge) {
  EXPECT_EQ(numpy_draws(42, 0, 4294967295ll, 5),
            (std::vector<int64_t>{1608637542, 3421126067, 4083286876, 787846414, 3143890026}));
  EXPECT_EQ(numpy_draws(42, 0, 4294967296ll, 3), (std::vector<int64_t>{1608637542, 3421126067, 4083286876}));
  NumpyLegacyRandom raw(42);
  EXPECT_EQ(raw.next_u32(), 1608637542u);
}

// np.random.seed(42); then in one stream: randint(5, 6) (draws nothing),
// randint(-100, 100), randint(0, 2**40) and randint(-2**62, 2**62) (64-bit draws),
// randint(10000, 99999).
TEST(NumpyLegacyRandom, RandintMixedRangesShareOneStream) {
  NumpyLegacyRandom rng(42);
  EXPECT_EQ(rng.randint(5, 6), 5);
  EXPECT_EQ(rng.randint(-100, 100), 2);
  EXPECT_EQ(rng.randint(0, int64_t{1} << 40), 772882432860ll);
  EXPECT_EQ(rng.randint(-(int64_t{1} << 62), int64_t{1} << 62), -1227911432882621334ll);
  EXPECT_EQ(rng.randint(10000, 99999), 86820);
}

}  // namespace
}  // namespace sb
