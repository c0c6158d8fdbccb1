#include "harness/config/dotted_path.h"

#include <sstream>
#include <stdexcept>

namespace sb {

std::vector<std::string> dotted_path_parts(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream stream(path);
  std::string part;
  while (std::getline(stream, part, '.')) parts.push_back(part);
  return parts;
}

bool is_array_index(const std::string& part) {
  return !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
}

void set_json_path(nlohmann::json& target, const std::string& path, const nlohmann::json& value) {
  nlohmann::json* at = &target;
  const std::vector<std::string> parts = dotted_path_parts(path);
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    const bool last = i + 1 == parts.size();
    if (at->is_array()) {
      if (!is_array_index(part) || std::stoul(part) >= at->size()) {
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
  for (const std::string& part : dotted_path_parts(path)) {
    if (at->is_array() && is_array_index(part) && std::stoul(part) < at->size()) {
      at = &(*at)[std::stoul(part)];
    } else if (at->is_object() && at->contains(part)) {
      at = &(*at)[part];
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace sb
