#pragma once
// Named sequence-length distributions shaped like the paper's data sets (docs:
// sparsebalance.md 1.6), as mixtures of uniform components (token counts at scale 1).
// They are shapes, not copies of the data sets' histograms:
//   bimodal   ChatQA2-Long-SFT-like: most mass under 4K and above 16K
//               55% in [256, 4096], 10% in [4096, 16384], 35% in [16384, 32768]
//   longtail  LongAlign-10k-like: 8K to 72K with a long tail
//               50% in [8192, 16384], 30% in [16384, 32768], 15% in [32768, 49152],
//               5% in [49152, 73728]
// A manifest scales them by data.synthetic.length_scale for small machines (e.g. 1/64
// turns bimodal into 4..512 tokens); scaled bounds are rounded and kept >= min_length.

#include <cstdint>
#include <string>
#include <vector>

namespace sb {

struct LengthComponent {
  double weight = 1.0;
  int64_t min_tokens = 0;
  int64_t max_tokens = 0;
};

std::vector<std::string> length_profile_names();  // "bimodal", "longtail"
// Throws std::invalid_argument naming the known profiles for an unknown name.
std::vector<LengthComponent> length_profile(const std::string& name);
// Every bound multiplied by scale, rounded to the nearest integer, and raised to at
// least min_length.
std::vector<LengthComponent> scale_length_components(const std::vector<LengthComponent>& components,
                                                     double scale, int64_t min_length);

}  // namespace sb
