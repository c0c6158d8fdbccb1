#include "harness/apps/attention_flags.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <vector>

#include "common/errors.h"
#include "harness/patterns/attention_patterns.h"

namespace sb::cli {
namespace {

std::vector<AttentionFlag> flags_of(const AttentionPatternPlugin& plugin, AttentionFlagSet set) {
  return set == AttentionFlagSet::kProfile ? plugin.profile_flags() : plugin.command_flags();
}

// Every pattern's flags of the set, each once (the first plug-in's help), with the
// patterns that take it.
struct PatternFlag {
  AttentionFlag flag;
  std::vector<std::string> patterns;
};
std::vector<PatternFlag> pattern_flags(AttentionFlagSet set) {
  std::vector<PatternFlag> flags;
  for (const AttentionPatternPlugin* plugin : attention_plugins()) {
    for (const AttentionFlag& flag : flags_of(*plugin, set)) {
      auto it = std::find_if(flags.begin(), flags.end(), [&](const PatternFlag& f) { return f.flag.flag == flag.flag; });
      if (it == flags.end()) it = flags.insert(flags.end(), PatternFlag{flag, {}});
      it->patterns.push_back(plugin->name());
    }
  }
  return flags;
}

std::string names_of(const std::vector<std::string>& patterns) {
  std::string names;
  for (const std::string& n : patterns) names += (names.empty() ? "" : " or ") + n;
  return names;
}

}  // namespace

void add_attention_flags(CLI::App* sub, AttentionCommandFlags& flags, AttentionFlagSet set,
                         const std::string& attention_help) {
  sub->add_option("--attention", flags.attention, attention_help)->capture_default_str();
  for (const PatternFlag& flag : pattern_flags(set)) {
    sub->add_option(flag.flag.flag, flags.values[flag.flag.flag], flag.flag.help + " (" + names_of(flag.patterns) + ")");
  }
}

AttentionOptions attention_of(const AttentionCommandFlags& flags, AttentionFlagSet set) {
  const AttentionPatternPlugin* plugin = nullptr;
  try {
    plugin = &attention_plugin(flags.attention);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("--attention", "", e.what(), "use one of the known names");
  }
  const std::vector<AttentionFlag> own = flags_of(*plugin, set);
  nlohmann::json object{{"name", plugin->name()}};
  std::map<std::string, std::string> flag_of_key;
  for (const PatternFlag& known : pattern_flags(set)) {
    const auto given = flags.values.find(known.flag.flag);
    if (given == flags.values.end() || given->second.empty()) continue;
    const auto mine = std::find_if(own.begin(), own.end(), [&](const AttentionFlag& a) { return a.flag == known.flag.flag; });
    if (mine == own.end()) {
      throw ConfigError(known.flag.flag, "", "applies to " + names_of(known.patterns) + " only", "leave it out");
    }
    // A number, or else a name (the pattern checks either; its error names the flag below).
    const nlohmann::json value = nlohmann::json::parse(given->second, nullptr, /*allow_exceptions=*/false);
    object[mine->key] = value.is_discarded() ? nlohmann::json(given->second) : value;
    flag_of_key[mine->key] = mine->flag;
  }
  try {
    return parse_attention(object, "$.attention", "--attention");
  } catch (const ConfigError& e) {
    const std::string key = e.json_path().substr(e.json_path().find_last_of('.') + 1);
    const auto flag = flag_of_key.find(key);
    throw ConfigError(flag != flag_of_key.end() ? flag->second : "--attention", "", e.problem(), e.fix());
  }
}

}  // namespace sb::cli
