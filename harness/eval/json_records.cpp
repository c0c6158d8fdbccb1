#include "harness/eval/json_records.h"

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/common/jsonl_file.h"

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
  for_each_jsonl_line(path, text, [&](const std::string& line, const std::string& where) {
    records.push_back(parse_ordered_jsonl_line(line, where, "", /*require_object=*/true));
  });
  return records;
}

}  // namespace sb
