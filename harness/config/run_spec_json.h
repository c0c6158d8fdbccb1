#pragma once
// A RunSpec as JSON and back, for the run plan the process that starts a job hands to
// its ranks (harness/runner/run_plan.h): the ranks rebuild each run from its resolved
// manifest instead of expanding the original manifest again.
//
//   {"name", "method", "baseline_method", "is_baseline", "sweep_point",
//    "manifest": <the run's resolved manifest>, "source": <the manifest as written>,
//    "file": <where it was read from>}
//
// run_spec_from_json(run_spec_to_json(run)) equals `run`: the resolved manifest
// round-trips (manifest.h), and `source` and `file`, which the resolved form leaves
// out, travel beside it so that messages name the same file and JSON paths.

#include <nlohmann/json.hpp>

#include "harness/config/manifest.h"

namespace sb {

nlohmann::json run_spec_to_json(const RunSpec& run);
// Throws ConfigError (naming the run's file) when the manifest does not parse.
RunSpec run_spec_from_json(const nlohmann::json& json);

}  // namespace sb
