#pragma once
// The JSON path of the ConfigError parsing this manifest raises, or "(no error)": what
// manifest tests compare, so that each bad key is shown to be reported where it is.

#include <nlohmann/json.hpp>

#include <string>

#include "common/errors.h"
#include "harness/config/manifest.h"

namespace sb::test {

inline std::string manifest_error_path(const nlohmann::json& manifest) {
  try {
    parse_manifest(manifest, "m.json");
  } catch (const ConfigError& e) {
    return e.json_path();
  }
  return "(no error)";
}

}  // namespace sb::test
