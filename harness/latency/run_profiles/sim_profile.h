#pragma once
// The latency profile a simulated run's compute times come from, and the predictor the
// run's BatchPlanner uses (the same object: the planner's predictions and the
// simulated compute agree except where DST's coverage floor raises a budget).
//
// Sources, first that applies:
//   1. --profile FILE on the command line (every run)
//   2. simulation.profile {"file": ...} (every run) or {"analytic": {...}}
//   3. the method's own "profile" (a file, as a real run would use)
// An analytic profile (harness/latency/analytic_profile.h) is built over
//   seq_lens  block/4, block/2, then every multiple of the block size (256 for dense)
//             up to the data's longest sample (>= 2 entries)
//   budgets   every integer 1 .. max(top_k, dst k_max) for MoBA, [0] for dense
// so the predictor interpolates only in length, between neighbouring block multiples.

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>

#include "harness/config/manifest.h"
#include "harness/latency/latency_predictor.h"

namespace sb {

struct SimProfile {
  std::shared_ptr<const LatencyPredictor> predictor;
  std::string kind;  // "analytic" or "measured" (the profile's own kind)
  std::string file;  // "" for an analytic profile made here
  nlohmann::json describe() const;  // {"kind", "file", ...} for context.json
  nlohmann::json details = nlohmann::json::object();
};

// run_manifest: one run's manifest (one method); longest_sample: the data's longest
// sample (analytic grid). ConfigError naming the JSON path when no profile is given.
SimProfile load_sim_profile(const Manifest& run_manifest, int64_t longest_sample,
                            const std::optional<std::string>& profile_override);

}  // namespace sb
