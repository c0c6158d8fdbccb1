#include "harness/config/sweep.h"

#include <map>
#include <stdexcept>

#include "common/errors.h"
#include "harness/config/dotted_path.h"

namespace sb {

std::vector<SweepAxis> parse_sweep(const nlohmann::json& sweep, const std::string& file) {
  if (!sweep.is_object() || sweep.empty()) {
    throw ConfigError(file, "$.sweep", "expected an object of {\"dotted.path\": [values, ...]}",
                      "e.g. {\"seed\": [1, 2], \"methods.dst.p\": [0.1, 0.2]}");
  }
  std::vector<SweepAxis> axes;
  for (const auto& [path, values] : sweep.items()) {
    const std::string where = "$.sweep[\"" + path + "\"]";
    for (const std::string& part : dotted_path_parts(path)) {
      if (part.empty()) throw ConfigError(file, where, "is not a dotted path", "write e.g. \"train.lr\"");
    }
    if (path == "name" || path == "sweep" || path.rfind("methods.name", 0) == 0) {
      throw ConfigError(file, where, "cannot be swept", "sweep parameters, not names");
    }
    if (!values.is_array() || values.empty()) {
      throw ConfigError(file, where, "expected a non-empty array of values", "list the values to try");
    }
    SweepAxis axis{path, {}};
    // Each value names its runs' folders: two values that name the same folder would
    // train into one (and a repeated value would train the same run twice).
    std::map<std::string, nlohmann::json> named;
    for (const auto& v : values) {
      if (v.is_object() || v.is_array() || v.is_null()) {
        throw ConfigError(file, where, "values must be strings, numbers or booleans, got " + v.dump());
      }
      const auto [earlier, inserted] = named.emplace(sweep_value_text(v), v);
      if (!inserted) {
        throw ConfigError(file, where,
                          earlier->second == v
                              ? "repeats the value " + v.dump()
                              : "has the values " + earlier->second.dump() + " and " + v.dump() +
                                    ", which both name their runs \"" + earlier->first +
                                    "\" (characters outside [A-Za-z0-9._-] become '-')",
                          earlier->second == v ? "list each value once (seeds: e.g. [1, 2, 3])"
                                               : "give values that differ in their letters, digits, '.', '_' or '-'");
      }
      axis.values.push_back(v);
    }
    axes.push_back(std::move(axis));
  }
  return axes;
}

std::string sweep_value_text(const nlohmann::json& value) {
  std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  for (char& c : text) {
    const bool safe = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    if (!safe) c = '-';
  }
  return text;
}

std::vector<std::string> sweep_labels(const std::vector<SweepAxis>& axes) {
  std::map<std::string, int> uses;
  for (const SweepAxis& a : axes) uses[dotted_path_parts(a.path).back()]++;
  std::vector<std::string> labels;
  for (const SweepAxis& a : axes) {
    const std::string last = dotted_path_parts(a.path).back();
    labels.push_back(uses[last] > 1 ? sweep_value_text(a.path) : last);
  }
  return labels;
}

}  // namespace sb
