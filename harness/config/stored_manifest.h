#pragma once
// A resolved manifest a run stored (<run>/manifest.resolved.json), read as what the run
// ran: a key whose default changed after the run, and which resolved manifests did not
// spell out then, gets the value the run used (AttentionPatternPlugin::upgrade_stored),
// so that kept results still resume, skip, fit and report as themselves.

#include <nlohmann/json.hpp>

#include <filesystem>

#include "harness/config/manifest.h"

namespace sb {

// The upgrades applied to a stored resolved manifest's JSON in place: every attention
// object of its methods and method_defaults.
void upgrade_stored_manifest(nlohmann::json& manifest);

// The stored file's JSON with the upgrades; ConfigError naming the file if unreadable.
nlohmann::json read_stored_manifest_json(const std::filesystem::path& file);

// The stored file parsed as a manifest, with the upgrades.
Manifest load_stored_manifest(const std::filesystem::path& file);

}  // namespace sb
