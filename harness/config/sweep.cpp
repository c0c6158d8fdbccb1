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
    for (const auto& v : values) {
      if (v.is_object() || v.is_array() || v.is_null()) {
        throw ConfigError(file, where, "values must be strings, numbers or booleans, got " + v.dump());
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
