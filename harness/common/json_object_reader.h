#pragma once
// Strict reading of one JSON object of a manifest. Every key the parser asks for
// (required or optional) becomes an allowed key; finish() then rejects any other key
// with an error naming its JSON path and the allowed keys. Wrong types name the path
// and the expected type. Errors are ConfigError (exit code 2).
//
//   JsonObjectReader train(json["train"], "$.train", file);
//   int64_t iterations = train.required<int64_t>("iterations");
//   double lr = train.optional<double>("lr", 1e-3);
//   train.finish();

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/errors.h"
#include "common/option_names.h"

namespace sb {

// "integer", "number", "string", ... and the JSON type of a value, for messages.
std::string json_type_name(const nlohmann::json& value);

template <typename T>
struct JsonTypeTraits;

template <>
struct JsonTypeTraits<int64_t> {
  static constexpr const char* name = "an integer";
  static bool matches(const nlohmann::json& v) { return v.is_number_integer(); }
};
template <>
struct JsonTypeTraits<double> {
  static constexpr const char* name = "a number";
  static bool matches(const nlohmann::json& v) { return v.is_number(); }
};
template <>
struct JsonTypeTraits<bool> {
  static constexpr const char* name = "true or false";
  static bool matches(const nlohmann::json& v) { return v.is_boolean(); }
};
template <>
struct JsonTypeTraits<std::string> {
  static constexpr const char* name = "a string";
  static bool matches(const nlohmann::json& v) { return v.is_string(); }
};

class JsonObjectReader {
 public:
  // Throws ConfigError unless value is a JSON object.
  JsonObjectReader(const nlohmann::json& value, std::string path, std::string file);

  const std::string& path() const { return path_; }
  const std::string& file() const { return file_; }
  std::string child_path(const std::string& key) const { return path_ + "." + key; }
  // Marks key allowed and says whether it is present.
  bool has(const std::string& key);
  // Whether key is present, without allowing it (for keys that are always rejected).
  bool contains(const std::string& key) const { return value_.contains(key); }

  template <typename T>
  T required(const std::string& key) {
    allowed_.insert(key);
    auto it = value_.find(key);
    if (it == value_.end()) {
      throw ConfigError(file_, child_path(key), "missing required key",
                        "add \"" + key + "\" (" + JsonTypeTraits<T>::name + ")");
    }
    return convert<T>(*it, child_path(key));
  }

  template <typename T>
  T optional(const std::string& key, const T& fallback) {
    allowed_.insert(key);
    auto it = value_.find(key);
    if (it == value_.end()) return fallback;
    return convert<T>(*it, child_path(key));
  }

  // A string that must be one of `choices`.
  std::string required_choice(const std::string& key, const std::vector<std::string>& choices);
  std::string optional_choice(const std::string& key, const std::string& fallback,
                              const std::vector<std::string>& choices);
  // The same, typed by the option's name table (option_names.h).
  template <class Value>
  Value required_option(const std::string& key, const OptionNames<Value>& names) {
    return names.from_name(required_choice(key, names.names()));
  }
  template <class Value>
  Value optional_option(const std::string& key, Value fallback, const OptionNames<Value>& names) {
    return names.from_name(optional_choice(key, names.name_of(fallback), names.names()));
  }

  // Raw access for nested objects and arrays: marks the key allowed; the caller
  // reads the value with its own reader. Missing -> ConfigError.
  const nlohmann::json& required_value(const std::string& key);
  // Null when absent.
  const nlohmann::json* optional_value(const std::string& key);

  // Rejects keys never asked for. Call after every key was read.
  void finish() const;

  // A key that only applies under some condition (e.g. "task is \"retrieval\""): present
  // while !applies -> ConfigError naming it and the condition.
  void reject_unless(const std::string& key, bool applies, const std::string& condition);

  // Range checks that report the JSON path of the offending key.
  void expect(bool condition, const std::string& key, const std::string& problem,
              const std::string& fix) const;

  template <typename T>
  T convert(const nlohmann::json& v, const std::string& path) const {
    if (!JsonTypeTraits<T>::matches(v)) {
      throw ConfigError(file_, path,
                        std::string("expected ") + JsonTypeTraits<T>::name + ", got " +
                            json_type_name(v) + " " + v.dump());
    }
    return v.get<T>();
  }

 private:
  const nlohmann::json& value_;
  std::string path_;
  std::string file_;
  std::set<std::string> allowed_;
};

// A hook for the schema test and for documentation: while a recorder is alive on this
// thread, every finish() records its object's path (array indices written "[]") and the
// keys the parser asked for there. Recorders nest; the innermost one records.
class JsonKeyRecorder {
 public:
  JsonKeyRecorder();
  ~JsonKeyRecorder();
  JsonKeyRecorder(const JsonKeyRecorder&) = delete;
  JsonKeyRecorder& operator=(const JsonKeyRecorder&) = delete;

  // Normalized path -> union of the allowed keys seen there.
  const std::map<std::string, std::set<std::string>>& keys() const { return keys_; }
  static void record(const std::string& path, const std::set<std::string>& keys);

 private:
  std::map<std::string, std::set<std::string>> keys_;
  JsonKeyRecorder* previous_;
};

// A path written in a manifest, made absolute: relative paths are relative to the
// manifest's folder (the current folder when manifest_file names no existing file);
// normalised (no ".", "..", doubled or trailing "/"), so one place has one spelling.
// Empty stays empty.
std::string resolve_manifest_path(const std::string& manifest_file, const std::string& value);

// Checks that value is an array and returns it; names path in the error.
const nlohmann::json& expect_json_array(const nlohmann::json& value, const std::string& path,
                                        const std::string& file);

}  // namespace sb
