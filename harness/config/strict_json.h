#pragma once
// The manifest's JSON reader: standard JSON, refusing what nlohmann's parser accepts
// silently or handles badly.
//   - a key repeated inside one object (JSON lets the last one win; a manifest that sets
//     "lr" twice is a mistake, not a choice), named with its JSON path;
//   - nesting deeper than kMaxManifestDepth levels (a manifest needs about 6; error
//     messages that print a value must not recurse without bound);
//   - syntax errors, with file:line:column.
// Every error is a ConfigError naming the file.

#include <nlohmann/json.hpp>

#include <string>

namespace sb {

inline constexpr int kMaxManifestDepth = 64;

nlohmann::json parse_strict_json(const std::string& text, const std::string& file, int max_depth = kMaxManifestDepth);

}  // namespace sb
