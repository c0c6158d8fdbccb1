#include "harness/config/strict_json.h"

#include <algorithm>
#include <set>
#include <vector>

#include "common/errors.h"

namespace sb {
namespace {

using json = nlohmann::json;

// One open object or array while parsing: where it is, and where its next element goes.
struct OpenContainer {
  std::string path;
  bool object = false;
  std::set<std::string> keys;  // objects: the keys seen so far
  std::string key;             // objects: the key of the value being parsed
  size_t index = 0;            // arrays: the index of the next element
};

bool plain_key(const std::string& key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::string path_of_next(const std::vector<OpenContainer>& open) {
  if (open.empty()) return "$";
  const OpenContainer& c = open.back();
  if (!c.object) return c.path + "[" + std::to_string(c.index) + "]";
  return plain_key(c.key) ? c.path + "." + c.key : c.path + "[" + json(c.key).dump() + "]";
}

void element_done(std::vector<OpenContainer>& open) {
  if (!open.empty() && !open.back().object) ++open.back().index;
}

}  // namespace

json parse_strict_json(const std::string& text, const std::string& file, int max_depth) {
  std::vector<OpenContainer> open;
  const json::parser_callback_t check = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start: {
        const std::string path = path_of_next(open);
        if (static_cast<int>(open.size()) >= max_depth) {
          throw ConfigError(file, path, "nests deeper than " + std::to_string(max_depth) + " levels",
                            "a manifest needs a few levels; remove the extra nesting");
        }
        open.push_back({path, event == json::parse_event_t::object_start, {}, {}, 0});
        break;
      }
      case json::parse_event_t::key: {
        OpenContainer& c = open.back();
        c.key = parsed.get<std::string>();
        if (!c.keys.insert(c.key).second) {
          throw ConfigError(file, path_of_next(open),
                            "is given twice in the same object (JSON would keep only the last)",
                            "remove one of the two");
        }
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        open.pop_back();
        element_done(open);
        break;
      case json::parse_event_t::value:
        element_done(open);
        break;
    }
    return true;
  };
  try {
    return json::parse(text, check);
  } catch (const json::parse_error& e) {
    // nlohmann's byte offset as a line and column a user can jump to.
    const size_t offset = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    size_t line = 1, column = 1;
    for (size_t i = 0; i < offset; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw ConfigError(file + ":" + std::to_string(line) + ":" + std::to_string(column), "",
                      std::string("invalid JSON: ") + e.what(), "fix the JSON syntax there");
  }
}

}  // namespace sb
