#include "harness/config/sweep.h"

#include <map>
#include <sstream>
#include <stdexcept>

#include "common/errors.h"

namespace sb {
namespace {

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream stream(path);
  std::string part;
  while (std::getline(stream, part, '.')) parts.push_back(part);
  return parts;
}

bool is_index(const std::string& part) {
  return !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

std::vector<SweepAxis> parse_sweep(const nlohmann::json& sweep, const std::string& file) {
  if (!sweep.is_object() || sweep.empty()) {
    throw ConfigError(file, "$.sweep", "expected an object of {\"dotted.path\": [values, ...]}",
                      "e.g. {\"seed\": [1, 2], \"methods.dst.p\": [0.1, 0.2]}");
  }
  std::vector<SweepAxis> axes;
  for (const auto& [path, values] : sweep.items()) {
    const std::string where = "$.sweep[\"" + path + "\"]";
    for (const std::string& part : split_path(path)) {
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

void set_json_path(nlohmann::json& target, const std::string& path, const nlohmann::json& value) {
  nlohmann::json* at = &target;
  const std::vector<std::string> parts = split_path(path);
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    const bool last = i + 1 == parts.size();
    if (at->is_array()) {
      if (!is_index(part) || std::stoul(part) >= at->size()) {
        throw std::invalid_argument("\"" + part + "\" is not an index of an array of " + std::to_string(at->size()));
      }
      at = &(*at)[std::stoul(part)];
    } else {
      if (at->is_null()) *at = nlohmann::json::object();
      if (!at->is_object()) throw std::invalid_argument("\"" + part + "\" is below a value that is not an object");
      nlohmann::json& child = (*at)[part];
      if (part == "attention" && child.is_string() && !last) child = nlohmann::json{{"name", child}};
      at = &child;
    }
    if (last) *at = value;
  }
}

bool has_json_path(const nlohmann::json& target, const std::string& path) {
  const nlohmann::json* at = &target;
  for (const std::string& part : split_path(path)) {
    if (at->is_array() && is_index(part) && std::stoul(part) < at->size()) {
      at = &(*at)[std::stoul(part)];
    } else if (at->is_object() && at->contains(part)) {
      at = &(*at)[part];
    } else {
      return false;
    }
  }
  return true;
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
  for (const SweepAxis& a : axes) uses[split_path(a.path).back()]++;
  std::vector<std::string> labels;
  for (const SweepAxis& a : axes) {
    const std::string last = split_path(a.path).back();
    labels.push_back(uses[last] > 1 ? sweep_value_text(a.path) : last);
  }
  return labels;
}

}  // namespace sb
