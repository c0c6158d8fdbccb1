#pragma once
// Vertical-slash's harness side (attention_pattern_plugin.h): the manifest keys
//   {"name": "vertical_slash", "budget": "top_p" | "top_k", "p": 0.9, "vertical_count",
//    "slash_count", "max_verticals", "max_slashes", "sink_tokens", "local_window",
//    "last_queries", "block_size", "expected_keys"}
// (docs/vertical_slash.md; expected_keys written back only when not its default), the
// profile flags of the index rules a profile records, the bench's --vs-* flags, and the
// simulator's pattern model (vertical_slash_simulation.h) with its fit
// (vertical_slash_pattern_fit.h).

#include <nlohmann/json.hpp>

#include <string>

#include "harness/patterns/attention_pattern_plugin.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_pattern.h"

namespace sb {

const AttentionPatternPlugin& vertical_slash_plugin();

// The options of a vertical_slash attention object at `path` of `file` (name included);
// ConfigError for another name or a key or value it does not take.
VerticalSlashOptions vertical_slash_options_from_json(const nlohmann::json& attention, const std::string& path,
                                                      const std::string& file);

}  // namespace sb
