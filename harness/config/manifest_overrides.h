#pragma once
// Command-line overrides of manifest values: `sparsebalance run M --set PATH=VALUE`
// (repeatable; `simulate` too). Each is applied to the manifest as written, in order,
// before it is parsed, so it is checked like a value in the file (a relative path value
// is relative to the manifest's folder, as in the file) and the resolved manifest (and
// with it a rerun's skip-or-conflict decision) carries it. That way one manifest in the
// repository runs on anyone's data paths.
//
//   PATH   a dotted path into the manifest ("train.lr", "data.jsonl.path"); under
//          "methods" the second part is a method's index or name ("methods.0.attention.top_k",
//          "methods.sab_dst.dst.p"), unlike a sweep axis, whose "methods.dst.p" means every
//          method's dst.p. Objects on the way are created. A sweep axis over the same
//          path still decides each run's value.
//   VALUE  JSON when it parses as JSON (3, 0.1, true, null, [1,2], {"a":1}, "quoted"),
//          otherwise the text itself as a string (data.jsonl.path=/data/chatqa2.jsonl).

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace sb {

struct ManifestOverride {
  std::string path;        // dotted, as given
  nlohmann::json value;
  std::string argument;    // "PATH=VALUE" as given, for messages
};

// ConfigError naming --set for an argument that is not PATH=VALUE.
ManifestOverride parse_manifest_override(const std::string& argument);
std::vector<ManifestOverride> parse_manifest_overrides(const std::vector<std::string>& arguments);

// Applies the overrides to `manifest` (the JSON as written) and returns the JSON path
// each one set, as the parser names it ("$.methods[1].dst.p" for "methods.sab_dst.dst.p").
// ConfigError naming --set and the argument for a path that cannot be set (an index past
// an array's end, a method name the manifest does not have, a key below a number).
std::vector<std::string> apply_manifest_overrides(nlohmann::json& manifest,
                                                  const std::vector<ManifestOverride>& overrides);

}  // namespace sb
