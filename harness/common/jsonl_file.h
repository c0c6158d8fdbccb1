#pragma once
// Reading a JSON-lines file (records.jsonl, timeline_events.jsonl): one JSON value per
// line, empty lines skipped. A run killed mid-write leaves a cut-off last line, so a line
// that does not parse, or that the caller's parser rejects, is a ConfigError naming
// file:line and saying what the line should have been.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <string>

namespace sb {

// Calls `each` with every line's value in order. `what` names a line in the error
// ("an iteration record"). Throws std::runtime_error when the file cannot be read.
void for_each_jsonl_value(const std::filesystem::path& file, const std::string& what,
                          const std::function<void(const nlohmann::json&)>& each);

}  // namespace sb
