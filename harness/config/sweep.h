#pragma once
// Sweeps: a grid over any manifest field (manifest key "sweep"), e.g.
//   "sweep": {"seed": [1, 2, 3], "methods.dst.anchor": ["mean", "min", "max"],
//             "methods.dst.p": [0.1, 0.2]}
// Each key is a dotted path into the manifest (array elements by index:
// "data.synthetic.length_mixture.0.max_tokens"). A path starting with "methods." is
// applied inside each method, and only to the methods whose resolved form has that
// field (here: the DST methods), so a baseline is run once per seed, not once per
// anchor x p. Axes are taken in the key order of the sweep object as stored (sorted by
// path). Every grid point is parsed as a whole manifest, so a bad path or value is an
// error naming the sweep axis.
//
// Run names: "<method>" then "__<label>=<value>" for each axis that applies, label =
// the last path component (the full path when two axes share one), values as JSON
// without quotes, characters outside [A-Za-z0-9._-] replaced by '-':
//   sab_dst__anchor=mean__p=0.1__seed=2
// Names are unique: an axis whose values repeat, or map to one name ("a/len.txt" and
// "a-len.txt"), is refused, and so is a grid that names two runs alike.
//
// Size: a manifest expands to at most its "max_runs" runs (default kDefaultMaxRuns),
// checked before any grid point is built; raise "max_runs" for a larger grid.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "harness/config/dotted_path.h"

namespace sb {

inline constexpr int64_t kDefaultMaxRuns = 1000;

struct SweepAxis {
  std::string path;
  std::vector<nlohmann::json> values;
};

// The axes of a manifest's "sweep" value; ConfigError naming the path for anything that
// is not an object of non-empty arrays of scalars.
std::vector<SweepAxis> parse_sweep(const nlohmann::json& sweep, const std::string& file);

// "a=b" fragments for the axes, with labels as described above.
std::vector<std::string> sweep_labels(const std::vector<SweepAxis>& axes);
std::string sweep_value_text(const nlohmann::json& value);

}  // namespace sb
