#pragma once
// The attention patterns this build knows: the one list of them (attention_patterns.cpp)
// and what the rest of the harness looks them up by. A new pattern is a folder under
// kernels/attention/patterns/ and one under harness/patterns/, and one line here.

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "harness/patterns/attention_pattern_plugin.h"

namespace sb {

// Every plug-in, in the order manifests and messages list them.
const std::vector<const AttentionPatternPlugin*>& attention_plugins();
std::vector<std::string> attention_pattern_names();

// The plug-in named `name` (a manifest's attention name); std::invalid_argument naming the
// known names for another.
const AttentionPatternPlugin& attention_plugin(const std::string& name);
// The plug-in of a configured pattern.
const AttentionPatternPlugin& attention_plugin(const AttentionPattern& pattern);
inline const AttentionPatternPlugin& attention_plugin(const AttentionOptions& options) {
  return attention_plugin(options.pattern());
}

// The attention of a method that names none: dense causal attention.
AttentionOptions default_attention_options();
// `name`'s pattern with every key at its default; std::invalid_argument for an unknown name.
AttentionOptions attention_options_named(const std::string& name);

// The pattern a command-line flag names (`--attention moba`), every key at its default;
// ConfigError naming the flag and the known names for another.
AttentionOptions attention_options_from_flag(const std::string& flag, const std::string& name);

// An attention object ({"name": ..., the pattern's keys}; a bare name string is
// {"name": name}) at `path` of `file`: the name must be known, every key one the named
// pattern takes (ConfigError naming the key and the patterns that take it otherwise).
AttentionOptions parse_attention(const nlohmann::json& value, const std::string& path, const std::string& file);
// The resolved attention object of `options`.
nlohmann::json attention_to_json(const AttentionOptions& options);

}  // namespace sb
