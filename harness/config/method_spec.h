#pragma once
// Methods of a manifest (methods[]): named combinations of an attention backend, a
// batching policy and a budget policy, with their parameters and the latency profile
// the policies predict with. One run per method (times the sweep).
//
//   {"name": "sab_dst",                  folder name of the run
//    "preset": "sab+dst",                optional, see method_preset_names()
//    "attention": "moba" | {"name": "moba", "block_size": 256, "top_k": 32},   (a pattern and its
//                                        keys: harness/patterns/attention_patterns.h)
//    "batching": "sequential" | "lbb" | "sab",
//    "budget": "fixed" | "dst",
//    "dst": {"anchor": "mean", "p": 0.1, "k_min": 1, "k_max": 2 x top_k, "bottleneck": "smallest",
//            "raise": "anchor"},
//    "sab": {"ema_alpha": 0.2},
//    "profile": "profiles/cpu.json",     latency profile (needed by sab and dst)
//    "latency_calibration": {"ema_alpha": 0.3}}  optional; online calibration of the
//                                        predictions (harness/latency/latency_calibration.h)
//
// Precedence: the method's own keys, then its preset, then the manifest's
// method_defaults (same keys, no name or preset), of which only the parts that apply
// are taken (dst when the budget is dst, sab when batching is sab, an attention pattern's
// keys when the method has that pattern, latency_calibration when the method has a profile). In the method itself, keys that do not apply are errors.
// The resolved form (method_to_json) spells every field out; it parses back to itself.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "harness/balance/batching_policy.h"
#include "harness/balance/budget_policy.h"
#include "harness/patterns/attention_patterns.h"
#include "kernels/attention/patterns/attention_pattern.h"

namespace sb {

struct SabSection {
  double ema_alpha = 0.2;
};

struct LatencyCalibrationSection {
  bool enabled = false;  // on when the method (or method_defaults) has the key
  double ema_alpha = 0.3;
};

struct MethodSection {
  std::string name;
  std::string preset;  // "" when none
  AttentionOptions attention = default_attention_options();  // dense when the method names none
  BatchingKind batching = BatchingKind::kSequential;
  BudgetKind budget = BudgetKind::kFixed;
  // Meaningful when budget is dst; k_max is 2 x top_k when the file has none (resolved).
  DstOptions dst;
  SabSection sab;  // meaningful when batching is sab
  std::string profile;  // absolute path once resolved; "" when none
  LatencyCalibrationSection latency_calibration;
};

std::vector<std::string> method_preset_names();

// j: one methods[] entry; defaults: the manifest's method_defaults (or null); path:
// "$.methods[i]"; manifest_file: the manifest (errors, relative paths).
MethodSection parse_method_section(const nlohmann::json& j, const nlohmann::json* defaults,
                                   const std::string& path, const std::string& manifest_file);
nlohmann::json method_to_json(const MethodSection& method);

// Whether the method's policies predict latency (sab batching or dst budgets).
bool method_needs_profile(const MethodSection& method);
// ConfigError at <path>.profile when the method needs a profile and names none, unless
// simulation_profile (the manifest's simulation.profile serves `simulate`).
void check_method_profile(const MethodSection& method, const std::string& path, const std::string& manifest_file,
                          bool simulation_profile);

// Checks the manifest's method_defaults: only method keys (no name or preset), each
// of the right type; ConfigError naming the JSON path otherwise.
void check_method_defaults(const nlohmann::json& defaults, const std::string& path,
                           const std::string& manifest_file);

}  // namespace sb
