#include "harness/config/stored_manifest.h"

#include "harness/common/atomic_file.h"
#include "harness/config/strict_json.h"
#include "harness/patterns/attention_patterns.h"

namespace sb {

namespace {

void upgrade_attention(nlohmann::json& attention) {
  if (!attention.is_object() || !attention.contains("name") || !attention["name"].is_string()) return;
  for (const AttentionPatternPlugin* plugin : attention_plugins()) {
    if (plugin->name() == attention["name"].get<std::string>()) plugin->upgrade_stored(attention);
  }
}

}  // namespace

void upgrade_stored_manifest(nlohmann::json& manifest) {
  if (!manifest.is_object()) return;
  if (manifest.contains("method_defaults") && manifest["method_defaults"].contains("attention")) {
    upgrade_attention(manifest["method_defaults"]["attention"]);
  }
  if (manifest.contains("methods") && manifest["methods"].is_array()) {
    for (nlohmann::json& method : manifest["methods"]) {
      if (method.is_object() && method.contains("attention")) upgrade_attention(method["attention"]);
    }
  }
}

nlohmann::json read_stored_manifest_json(const std::filesystem::path& file) {
  std::string text;
  try {
    text = read_file(file);
  } catch (const std::exception& e) {
    throw ConfigError(file.string(), "", e.what(), "point at a run folder written by `sparsebalance run`");
  }
  nlohmann::json manifest = parse_strict_json(text, file.string());
  upgrade_stored_manifest(manifest);
  return manifest;
}

Manifest load_stored_manifest(const std::filesystem::path& file) {
  return parse_manifest(read_stored_manifest_json(file), file.string());
}

}  // namespace sb
