#include "harness/common/json_differences.h"

namespace sb {

std::string json_field_differences(const nlohmann::json& a, const nlohmann::json& b) {
  std::string out;
  const auto add = [&out](const std::string& key, const std::string& left, const std::string& right) {
    out += (out.empty() ? "" : ", ") + key + " " + left + " vs " + right;
  };
  for (const auto& [key, value] : a.items()) {
    const auto other = b.find(key);
    if (other == b.end()) {
      add(key, value.dump(), "(absent)");
    } else if (*other != value) {
      add(key, value.dump(), other->dump());
    }
  }
  for (const auto& [key, value] : b.items()) {
    if (!a.contains(key)) add(key, "(absent)", value.dump());
  }
  return out;
}

}  // namespace sb
