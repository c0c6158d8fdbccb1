#include "harness/common/jsonl_file.h"

#include "common/errors.h"
#include "harness/common/atomic_file.h"

namespace sb {
namespace {

bool is_blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

template <typename Json>
Json parse_line(const std::string& line, const std::string& where, const std::string& fix, bool require_object) {
  Json value;
  try {
    value = Json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(where, "", std::string("invalid JSON: ") + e.what(), fix);
  }
  if (require_object && !value.is_object()) throw ConfigError(where, "$", "expected a JSON object", fix);
  return value;
}

}  // namespace

size_t for_each_jsonl_line(const std::filesystem::path& file, const std::string& text,
                           const std::function<void(const std::string& line, const std::string& where)>& each,
                           bool unterminated_last_line) {
  size_t start = 0, complete = 0;
  int64_t number = 0;
  while (start < text.size()) {
    const size_t newline = text.find('\n', start);
    const bool terminated = newline != std::string::npos;
    if (!terminated && !unterminated_last_line) break;
    const size_t end = terminated ? newline : text.size();
    ++number;
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (terminated) complete = start;
    if (!is_blank(line)) each(line, file.string() + ":" + std::to_string(number));
  }
  return complete;
}

nlohmann::json parse_jsonl_line(const std::string& line, const std::string& where, const std::string& fix,
                                bool require_object) {
  return parse_line<nlohmann::json>(line, where, fix, require_object);
}

nlohmann::ordered_json parse_ordered_jsonl_line(const std::string& line, const std::string& where,
                                                const std::string& fix, bool require_object) {
  return parse_line<nlohmann::ordered_json>(line, where, fix, require_object);
}

void for_each_jsonl_value(const std::filesystem::path& file, const std::string& what,
                          const std::function<void(const nlohmann::json&)>& each, bool unterminated_last_line) {
  for_each_jsonl_line(file, read_file(file), [&](const std::string& line, const std::string& where) {
    try {
      each(nlohmann::json::parse(line));
    } catch (const std::exception& e) {
      throw ConfigError(where, "", "is not " + what + ": " + e.what(),
                        "a run killed mid-write leaves its last line cut off, which `sparsebalance run` redoes "
                        "when it resumes the run; otherwise rerun that run with --force (deleting lines would "
                        "leave iterations missing)");
    }
  }, unterminated_last_line);
}

}  // namespace sb
