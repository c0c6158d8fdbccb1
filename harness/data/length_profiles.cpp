#include "harness/data/length_profiles.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace sb {

std::vector<std::string> length_profile_names() { return {"bimodal", "longtail"}; }

std::vector<LengthComponent> length_profile(const std::string& name) {
  if (name == "bimodal") return {{0.55, 256, 4096}, {0.10, 4096, 16384}, {0.35, 16384, 32768}};
  if (name == "longtail") {
    return {{0.50, 8192, 16384}, {0.30, 16384, 32768}, {0.15, 32768, 49152}, {0.05, 49152, 73728}};
  }
  throw std::invalid_argument("unknown length profile \"" + name + "\"; known: bimodal, longtail");
}

std::vector<LengthComponent> scale_length_components(const std::vector<LengthComponent>& components,
                                                     double scale, int64_t min_length) {
  if (!(scale > 0)) throw std::invalid_argument("length scale must be > 0");
  std::vector<LengthComponent> out;
  for (const LengthComponent& c : components) {
    const auto scaled = [&](int64_t v) {
      return std::max<int64_t>(min_length, std::llround(static_cast<double>(v) * scale));
    };
    out.push_back({c.weight, scaled(c.min_tokens), scaled(c.max_tokens)});
  }
  return out;
}

}  // namespace sb
