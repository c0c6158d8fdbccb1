#include "harness/eval/json_records.h"

#include "harness/common/atomic_file.h"
#include "harness/common/errors.h"

namespace sb {

std::vector<nlohmann::ordered_json> read_json_records(const std::filesystem::path& path) {
  if (!std::filesystem::is_regular_file(path)) throw ConfigError(path.string(), "", "is missing or not a file");
  const std::string text = read_file(path);
  std::vector<nlohmann::ordered_json> records;
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {
    nlohmann::ordered_json all;
    try {
      all = nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError(path.string(), "", std::string("invalid JSON: ") + e.what());
    }
    for (size_t i = 0; i < all.size(); ++i) {
      if (!all[i].is_object()) throw ConfigError(path.string(), "$[" + std::to_string(i) + "]", "expected an object");
      records.push_back(std::move(all[i]));
    }
    return records;
  }
  size_t start = 0;
  int64_t number = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++number;
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path.string() + ":" + std::to_string(number);
    try {
      records.push_back(nlohmann::ordered_json::parse(line));
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError(where, "", std::string("invalid JSON: ") + e.what());
    }
    if (!records.back().is_object()) throw ConfigError(where, "$", "expected a JSON object");
  }
  return records;
}

}  // namespace sb
