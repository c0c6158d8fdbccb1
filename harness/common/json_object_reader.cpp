#include "harness/common/json_object_reader.h"

#include <algorithm>
#include <filesystem>
#include <regex>

namespace sb {
namespace {

std::string join_quoted(const std::vector<std::string>& items) {
  std::string text;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) text += ", ";
    text += "\"" + items[i] + "\"";
  }
  return text;
}

thread_local JsonKeyRecorder* active_recorder = nullptr;

}  // namespace

JsonKeyRecorder::JsonKeyRecorder() : previous_(active_recorder) { active_recorder = this; }

JsonKeyRecorder::~JsonKeyRecorder() { active_recorder = previous_; }

void JsonKeyRecorder::record(const std::string& path, const std::set<std::string>& keys) {
  if (active_recorder == nullptr) return;
  static const std::regex index("\\[[0-9]+\\]");
  auto& slot = active_recorder->keys_[std::regex_replace(path, index, "[]")];
  slot.insert(keys.begin(), keys.end());
}

std::string json_type_name(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "an integer";
    case nlohmann::json::value_t::number_float: return "a number";
    case nlohmann::json::value_t::binary: return "binary data";
    case nlohmann::json::value_t::discarded: return "a discarded value";
  }
  return "an unknown JSON type";
}

JsonObjectReader::JsonObjectReader(const nlohmann::json& value, std::string path,
                                   std::string file)
    : value_(value), path_(std::move(path)), file_(std::move(file)) {
  if (!value_.is_object()) {
    throw ConfigError(file_, path_, "expected an object, got " + json_type_name(value_));
  }
}

bool JsonObjectReader::has(const std::string& key) {
  allowed_.insert(key);
  return value_.contains(key);
}

std::string JsonObjectReader::required_choice(const std::string& key,
                                              const std::vector<std::string>& choices) {
  std::string chosen = required<std::string>(key);
  if (std::find(choices.begin(), choices.end(), chosen) == choices.end()) {
    throw ConfigError(file_, child_path(key), "unknown value \"" + chosen + "\"",
                      "use one of " + join_quoted(choices));
  }
  return chosen;
}

std::string JsonObjectReader::optional_choice(const std::string& key, const std::string& fallback,
                                              const std::vector<std::string>& choices) {
  if (!has(key)) return fallback;
  return required_choice(key, choices);
}

const nlohmann::json& JsonObjectReader::required_value(const std::string& key) {
  allowed_.insert(key);
  auto it = value_.find(key);
  if (it == value_.end()) {
    throw ConfigError(file_, child_path(key), "missing required key", "add \"" + key + "\"");
  }
  return *it;
}

const nlohmann::json* JsonObjectReader::optional_value(const std::string& key) {
  allowed_.insert(key);
  auto it = value_.find(key);
  return it == value_.end() ? nullptr : &*it;
}

void JsonObjectReader::finish() const {
  JsonKeyRecorder::record(path_, allowed_);
  for (auto it = value_.begin(); it != value_.end(); ++it) {
    if (allowed_.count(it.key())) continue;
    std::vector<std::string> allowed(allowed_.begin(), allowed_.end());
    throw ConfigError(file_, child_path(it.key()), "unknown key \"" + it.key() + "\"",
                      "remove it or use one of the allowed keys at " + path_ + ": " +
                          join_quoted(allowed));
  }
}

void JsonObjectReader::reject_unless(const std::string& key, bool applies, const std::string& condition) {
  if (has(key) && !applies) {
    throw ConfigError(file_, child_path(key), "applies only when " + condition,
                      "remove it, or change the setting it depends on");
  }
}

std::string resolve_manifest_path(const std::string& manifest_file, const std::string& value) {
  namespace fs = std::filesystem;
  if (value.empty()) return value;
  fs::path path(value);
  if (!path.is_absolute()) {
    const fs::path manifest(manifest_file);
    path = fs::absolute((fs::exists(manifest) ? manifest.parent_path() : fs::current_path()) / path);
  }
  // One spelling per place: "dir/" and "dir", "a//b" and "a/b" must compare equal when a
  // rerun checks its resolved manifest against the one it wrote before.
  std::string normal = path.lexically_normal().string();
  while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
  return normal;
}

void JsonObjectReader::expect(bool condition, const std::string& key, const std::string& problem,
                              const std::string& fix) const {
  if (!condition) throw ConfigError(file_, child_path(key), problem, fix);
}

const nlohmann::json& expect_json_array(const nlohmann::json& value, const std::string& path,
                                        const std::string& file) {
  if (!value.is_array()) {
    throw ConfigError(file, path, "expected an array, got " + json_type_name(value));
  }
  return value;
}

}  // namespace sb
