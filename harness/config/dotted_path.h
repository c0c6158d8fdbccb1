#pragma once
// Dotted paths into a manifest's JSON, as sweep axes and --set write them:
// "train.lr", "data.synthetic.length_mixture.0.max_tokens" (array elements by index).

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace sb {

// "a.b.0" -> {"a", "b", "0"} (an empty part stays, for the callers to refuse).
std::vector<std::string> dotted_path_parts(const std::string& path);
// Whether a part indexes an array: digits only.
bool is_array_index(const std::string& part);

// Sets `value` at the dotted `path` inside `target` (creating objects on the way; a
// method's "attention" string shorthand becomes {"name": ...} first). Throws
// std::invalid_argument for an index into something that is not an array, or out of range.
void set_json_path(nlohmann::json& target, const std::string& path, const nlohmann::json& value);
// Whether the dotted path names an existing value in `target`.
bool has_json_path(const nlohmann::json& target, const std::string& path);

}  // namespace sb
