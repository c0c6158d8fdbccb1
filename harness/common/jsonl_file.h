#pragma once
// Reading JSON-lines text (records.jsonl, timeline_events.jsonl, predictions, SFT data):
// one JSON value per line, blank lines skipped, every error naming file:line. A process
// killed mid-write leaves a cut-off last line; each reader says what it does with one.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace sb {

// Calls each(line, where) for every non-blank line of `text` (the contents of `file`) in
// order; where = "file:N", N counting from 1 over all lines. A last line without its
// newline is passed only when `unterminated_last_line` is true. Returns the bytes up to
// and including the last newline (what a writer appending to the file keeps).
size_t for_each_jsonl_line(const std::filesystem::path& file, const std::string& text,
                           const std::function<void(const std::string& line, const std::string& where)>& each,
                           bool unterminated_last_line = true);

// One line's value; a ConfigError naming `where` ("invalid JSON: ...", then `fix`) when
// it does not parse, or, with require_object, when it is not a JSON object.
nlohmann::json parse_jsonl_line(const std::string& line, const std::string& where, const std::string& fix,
                                bool require_object = false);
nlohmann::ordered_json parse_ordered_jsonl_line(const std::string& line, const std::string& where,
                                                const std::string& fix, bool require_object = false);

// Calls `each` with every line's value of `file` in order. A line that does not parse,
// or that `each` rejects (any exception), is a ConfigError naming file:line and `what`
// the line should have been ("an iteration record"). Throws std::runtime_error when the
// file cannot be read. A last line without its newline is passed only when
// `unterminated_last_line` is true.
void for_each_jsonl_value(const std::filesystem::path& file, const std::string& what,
                          const std::function<void(const nlohmann::json&)>& each, bool unterminated_last_line = true);

}  // namespace sb
