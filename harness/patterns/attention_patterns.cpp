#include "harness/patterns/attention_patterns.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "common/errors.h"
#include "harness/patterns/dense/dense_plugin.h"
#include "harness/patterns/moba/moba_plugin.h"
#include "harness/patterns/sliding_window/sliding_window_plugin.h"
#include "harness/patterns/vertical_slash/vertical_slash_plugin.h"

namespace sb {

const std::vector<const AttentionPatternPlugin*>& attention_plugins() {
  static const std::vector<const AttentionPatternPlugin*> plugins{
      &dense_plugin(),
      &moba_plugin(),
      &vertical_slash_plugin(),
      &sliding_window_plugin(),
  };
  return plugins;
}

std::vector<std::string> attention_pattern_names() {
  std::vector<std::string> names;
  for (const AttentionPatternPlugin* plugin : attention_plugins()) names.push_back(plugin->name());
  return names;
}

const AttentionPatternPlugin& attention_plugin(const std::string& name) {
  for (const AttentionPatternPlugin* plugin : attention_plugins()) {
    if (plugin->name() == name) return *plugin;
  }
  std::string known;
  for (const std::string& n : attention_pattern_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown attention \"" + name + "\"; known: " + known);
}

const AttentionPatternPlugin& attention_plugin(const AttentionPattern& pattern) { return attention_plugin(pattern.name()); }

AttentionOptions default_attention_options() { return attention_plugin("dense").make_default(); }

AttentionOptions attention_options_named(const std::string& name) { return attention_plugin(name).make_default(); }

AttentionOptions attention_options_from_flag(const std::string& flag, const std::string& name) {
  try {
    return attention_options_named(name);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(flag, "", e.what(), "use one of the known names");
  }
}

namespace {

// "name is \"a\" or \"b\"": the patterns that take `key`.
std::string patterns_taking(const std::string& key) {
  std::vector<std::string> names;
  for (const AttentionPatternPlugin* plugin : attention_plugins()) {
    for (const std::string& k : plugin->keys()) {
      if (k == key) names.push_back("\"" + plugin->name() + "\"");
    }
  }
  std::string text = "name is ";
  for (size_t i = 0; i < names.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  }
  return text;
}

}  // namespace

AttentionOptions parse_attention(const nlohmann::json& value, const std::string& path, const std::string& file) {
  const nlohmann::json object = value.is_string() ? nlohmann::json{{"name", value}} : value;
  JsonObjectReader r(object, path, file);
  const std::string name = r.required_choice("name", attention_pattern_names());
  const AttentionPatternPlugin& plugin = attention_plugin(name);
  // A key of another pattern names the patterns that take it.
  const std::vector<std::string> own = plugin.keys();
  std::set<std::string> others;
  for (const AttentionPatternPlugin* p : attention_plugins()) {
    for (const std::string& k : p->keys()) {
      if (std::find(own.begin(), own.end(), k) == own.end()) others.insert(k);
    }
  }
  for (const std::string& key : others) r.reject_unless(key, false, patterns_taking(key));
  AttentionOptions options = plugin.parse(r);
  r.finish();
  return options;
}

nlohmann::json attention_to_json(const AttentionOptions& options) {
  return attention_plugin(options).to_json(options.pattern());
}

std::vector<int64_t> analytic_profile_lengths(int64_t block, int64_t longest_sample) {
  std::vector<int64_t> seq_lens;
  if (block >= 8) {
    seq_lens.push_back(block / 4);
    seq_lens.push_back(block / 2);
  }
  const int64_t top = std::max<int64_t>(2, (longest_sample + block - 1) / block);
  for (int64_t i = 1; i <= top; ++i) seq_lens.push_back(i * block);
  return seq_lens;
}

AnalyticGrid AttentionPatternPlugin::analytic_grid(const AttentionPattern& /*pattern*/, int64_t longest_sample,
                                                   int64_t /*dst_k_max*/) const {
  return {analytic_profile_lengths(256, longest_sample), {0}};
}

AttentionOptions AttentionPatternPlugin::make_default() const {
  const nlohmann::json object{{"name", name()}};
  JsonObjectReader r(object, "$.attention", "(defaults)");
  r.required<std::string>("name");
  return parse(r);
}

}  // namespace sb
