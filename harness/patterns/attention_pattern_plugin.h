#pragma once
// The harness side of an attention pattern (docs/attention_patterns.md): its manifest
// keys, its command-line flags, how a latency profile's fields read back, its `bench
// attention` variants, and the simulator's model of it with the fits that calibrate the
// model. The kernel side (backend, CP selector, work) is the AttentionPattern it makes
// (kernels/attention/patterns/attention_pattern.h). Every plug-in is listed once, in
// attention_patterns.cpp.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "harness/common/json_object_reader.h"
#include "harness/patterns/attention_simulation.h"
#include "kernels/attention/patterns/attention_pattern.h"

namespace sb {

// A command-line flag that sets one manifest key of the pattern (`sparsebalance profile`
// takes them; the profile command lines sparsebalance prints name them).
struct AttentionFlag {
  std::string flag;  // "--block"
  std::string key;   // "block_size"
  std::string help;
  // Written into every profile command line (else only where the value is not the default).
  bool always_written = false;
};

// A manifest key a `bench attention` flag sets (errors in its value name the flag).
struct AttentionBenchKey {
  std::string key;   // "block_size"
  std::string flag;  // "--block"
  nlohmann::json value;
};

// One `bench attention --impl` entry of the pattern besides its plain name.
struct AttentionBenchVariant {
  std::string suffix;        // "fused": --impl moba-fused
  nlohmann::json keys;       // manifest keys it sets ({"cuda_kernel": "fused"})
  bool sdpa_flash_only = false;  // SDPA pinned to flash-attention (dense-flash)
  bool cuda_only = false;    // exists on CUDA only
};

// The lengths and budgets an analytic latency profile covers.
struct AnalyticGrid {
  std::vector<int64_t> seq_lens;
  std::vector<int64_t> budgets;
};
// [our rule] Lengths block / 4 and block / 2 (when block >= 8), then every multiple of
// `block` up to the one covering longest_sample (at least 2 of them).
std::vector<int64_t> analytic_profile_lengths(int64_t block, int64_t longest_sample);

class AttentionPatternPlugin {
 public:
  virtual ~AttentionPatternPlugin() = default;
  // The kernel pattern's name ("moba").
  virtual std::string name() const = 0;

  // ---- methods[].attention
  // The keys besides "name" (method_defaults pass them to methods of this pattern).
  virtual std::vector<std::string> keys() const { return {}; }
  // The pattern of an attention object whose keys `r` reads (the caller checks "name" and
  // calls r.finish()); ConfigError naming the key for a value out of range.
  virtual AttentionOptions parse(JsonObjectReader& r) const = 0;
  // The resolved attention object, "name" included, every key spelled out: parse() reads it
  // back to the same pattern.
  virtual nlohmann::json to_json(const AttentionPattern& pattern) const = 0;
  // Type checks of this pattern's keys in a method_defaults attention object (values are
  // checked where a method takes them).
  virtual void check_default_keys(JsonObjectReader& /*r*/) const {}
  // A resolved attention object a run stored before one of this pattern's keys was spelled
  // out in resolved manifests: adds that key with the value the run ran with, so that kept
  // results read as what they are after a default changes (harness/config/stored_manifest.h).
  virtual void upgrade_stored(nlohmann::json& /*attention*/) const {}
  // The pattern with every key at its default.
  AttentionOptions make_default() const;

  // ---- command lines
  // The flags `sparsebalance profile` takes (a profile measures a grid of budgets).
  virtual std::vector<AttentionFlag> profile_flags() const { return {}; }
  // The flags of the commands that run a model with one attention (`eval`, `generate`):
  // by default the profile's.
  virtual std::vector<AttentionFlag> command_flags() const { return profile_flags(); }
  // The manifest keys `bench attention`'s flags set for this pattern, from the flags'
  // values ({"block": 64, "top_k": 8, ...}: BenchAttentionFlags' fields by name).
  virtual std::vector<AttentionBenchKey> bench_keys(const nlohmann::json& /*bench_flags*/) const { return {}; }
  virtual std::vector<AttentionBenchVariant> bench_variants() const { return {}; }

  // ---- latency profiles
  // The pattern whose profile_fields() a profile recorded (every other key at its
  // default): what `profile --check` measures again.
  virtual AttentionOptions from_profile_fields(const std::map<std::string, int64_t>& fields) const = 0;

  // ---- the simulator
  // The grid of an analytic latency profile (simulation.profile.analytic) for samples of
  // up to longest_sample tokens; dst_k_max > 0: DST's cap. By default lengths in steps of
  // 256 tokens (analytic_profile_lengths) and no budget.
  virtual AnalyticGrid analytic_grid(const AttentionPattern& pattern, int64_t longest_sample, int64_t dst_k_max) const;
  // The pattern's model for one simulated run (attention_simulation.h). ConfigError naming
  // $.simulation.coverage in `manifest_file` where the settings give no model.
  virtual std::unique_ptr<AttentionSimulation> simulation(const AttentionPattern& pattern,
                                                          const SimulationCoverage& coverage,
                                                          const std::string& manifest_file) const = 0;
  // simulation.coverage.fit_from: the settings fitted to the measured runs of the same
  // pattern under `results_dir` (ConfigError naming json_path in manifest_file when none
  // qualifies), what was fitted written to `log`, and the runs used. Patterns without a
  // coverage model return `coverage` unchanged and no runs.
  virtual FittedCoverage fit_coverage(const AttentionPattern& /*pattern*/, const SimulationCoverage& coverage,
                                      const std::filesystem::path& /*results_dir*/,
                                      const std::string& /*manifest_file*/, const std::string& /*json_path*/,
                                      std::ostream& /*log*/) const {
    return {coverage, {}};
  }
};

}  // namespace sb
