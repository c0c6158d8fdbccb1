#include "harness/config/manifest_overrides.h"

#include <stdexcept>

#include "common/errors.h"
#include "harness/config/dotted_path.h"

namespace sb {
namespace {

using nlohmann::json;

const char* const kFix = "write --set PATH=VALUE, e.g. --set train.lr=0.0002 or --set data.jsonl.path=/data/sft.jsonl";

// "methods.<name>.rest" -> "methods.<index>.rest"; other paths unchanged.
std::string with_method_index(const json& manifest, const ManifestOverride& o) {
  std::vector<std::string> parts = dotted_path_parts(o.path);
  if (parts.size() < 2 || parts[0] != "methods" || is_array_index(parts[1])) return o.path;
  const bool listed = manifest.is_object() && manifest.contains("methods") && manifest["methods"].is_array();
  const json methods = listed ? manifest["methods"] : json::array();
  std::string names;
  for (size_t i = 0; i < methods.size(); ++i) {
    const bool named = methods[i].is_object() && methods[i].contains("name") && methods[i]["name"].is_string();
    const std::string name = named ? methods[i]["name"].get<std::string>() : "";
    if (name == parts[1]) {
      parts[1] = std::to_string(i);
      std::string path;
      for (const std::string& part : parts) path += (path.empty() ? "" : ".") + part;
      return path;
    }
    names += (names.empty() ? "" : ", ") + name;
  }
  throw ConfigError("--set", o.argument, "the manifest has no method named \"" + parts[1] + "\"",
                    "name one of its methods (" + names + ") or give its index, e.g. methods.0");
}

}  // namespace

ManifestOverride parse_manifest_override(const std::string& argument) {
  const size_t eq = argument.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError("--set", argument, "is not PATH=VALUE", kFix);
  }
  ManifestOverride o;
  o.argument = argument;
  o.path = argument.substr(0, eq);
  for (const std::string& part : dotted_path_parts(o.path)) {
    if (part.empty()) throw ConfigError("--set", argument, "\"" + o.path + "\" is not a dotted path", kFix);
  }
  if (o.path.back() == '.') throw ConfigError("--set", argument, "\"" + o.path + "\" is not a dotted path", kFix);
  const std::string text = argument.substr(eq + 1);
  o.value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (o.value.is_discarded()) o.value = text;
  return o;
}

std::vector<ManifestOverride> parse_manifest_overrides(const std::vector<std::string>& arguments) {
  std::vector<ManifestOverride> out;
  for (const std::string& argument : arguments) out.push_back(parse_manifest_override(argument));
  return out;
}

std::vector<std::string> apply_manifest_overrides(json& manifest, const std::vector<ManifestOverride>& overrides) {
  std::vector<std::string> json_paths;
  for (const ManifestOverride& o : overrides) {
    const std::string path = with_method_index(manifest, o);
    try {
      set_json_path(manifest, path, o.value);
    } catch (const std::exception& e) {  // a bad index, a huge one (out_of_range), a non-object root
      throw ConfigError("--set", o.argument, std::string("cannot be set: ") + e.what(), kFix);
    }
    std::string json_path = "$";
    for (const std::string& part : dotted_path_parts(path)) {
      json_path += is_array_index(part) ? "[" + part + "]" : "." + part;
    }
    for (size_t earlier = 0; earlier < json_paths.size(); ++earlier) {
      if (json_paths[earlier] == json_path) {
        throw ConfigError("--set", o.argument,
                          "sets " + json_path + " again (--set " + overrides[earlier].argument + " set it first)",
                          "give each path one --set");
      }
    }
    json_paths.push_back(json_path);
  }
  return json_paths;
}

}  // namespace sb
