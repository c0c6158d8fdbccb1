#pragma once
// A latency profile: one transformer layer's measured forward + backward time on one
// device, over a grid of (sequence length, attention budget), as SparseBalance's
// predictor needs it (docs: sparsebalance.md 1.2). Every cell keeps its median, its
// spread and the raw repetitions, and the file keeps the context it was measured in.
//
// Two more measured terms make packed micro-batches and whole stages predictable:
//   rest_ms[i]  the layer's work that does not depend on the attention pattern (norms,
//               q/k/v/o projections, rotary, MLP) for seq_lens[i] tokens;
//   head_ms[i]  the last stage's final norm + lm_head + loss for seq_lens[i] tokens;
//   model_ms[i] (optional) the whole model's forward + backward on one sequence of
//               seq_lens[i] tokens (embedding, every layer at budget model_budget, final
//               norm, lm_head, loss): what a micro-batch costs beyond its layers
//               (framework and autograd overhead, embedding, head) is measured, not
//               guessed (LatencyPredictor's micro-batch overhead). Absent in analytic
//               profiles and in profiles written before it existed.
//   packed_ms   (optional) one layer over packed_count sequences of seq_lens[0] tokens
//               each, packed into one micro-batch, at budgets[0]: how much of the
//               attention's cost a packed micro-batch pays once rather than per sequence
//               (LatencyPredictor::attention_fixed_ms). Absent as model_ms is.
// The attention term of a cell is layer_ms - rest_ms.
//
// File format (JSON, written by `sparsebalance profile`):
//   {"format": "sparsebalance-latency-profile", "version": 1,
//    "kind": "measured" | "analytic",
//    "model": {"preset": ..., "hidden_size": ..., ...}, "attention": {"name": ..., "block_size": ...},
//    "device": "cpu" | "cuda", "warmup": n, "repetitions": n,
//    "seq_lens": [ascending], "budgets": [ascending; [0] for dense attention],
//    "layer_ms": {"median": [[len][budget]], "spread": [[...]], "samples": [[[...]]]},
//    "rest_ms":  {"median": [len], "spread": [len], "samples": [[...]]},
//    "head_ms":  {"median": [len], "spread": [len], "samples": [[...]]},
//    "model_ms": {"median": [len], "spread": [len], "samples": [[...]]}, "model_budget": k  (optional),
//    "packed_ms": {"median": [m], "spread": [s], "samples": [[...]]}, "packed_count": n  (optional),
//    "context": {...}}
// "spread" is the interquartile range of the repetitions (ms).

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "models/qwen2/qwen2_config.h"

namespace sb {

struct LatencyStat {
  double median = 0;
  double spread = 0;            // interquartile range
  std::vector<double> samples;  // raw repetitions (ms); empty for analytic profiles
};

// Median and interquartile range (linear interpolation between order statistics) of
// samples; samples must be non-empty.
LatencyStat latency_stat_from_samples(std::vector<double> samples);

struct LatencyProfile {
  std::string kind = "measured";  // "measured" or "analytic" (computed, not timed)
  nlohmann::json model = nlohmann::json::object();
  std::string attention;       // "moba" or "dense"
  int64_t block_size = 0;      // MoBA block size (0 for dense)
  std::string device = "cpu";
  int64_t warmup = 0;
  int64_t repetitions = 0;
  std::vector<int64_t> seq_lens;           // ascending, >= 2 entries
  std::vector<int64_t> budgets;            // ascending, >= 1 entry
  std::vector<std::vector<LatencyStat>> layer_ms;  // [seq_len][budget]
  std::vector<LatencyStat> rest_ms;                // [seq_len]
  std::vector<LatencyStat> head_ms;                // [seq_len]
  std::vector<LatencyStat> model_ms;               // [seq_len] or empty (not measured)
  int64_t model_budget = 0;                        // the budget model_ms ran at (MoBA)
  std::optional<LatencyStat> packed_ms;            // packed_count x seq_lens[0] tokens, or none
  int64_t packed_count = 0;                        // sequences in packed_ms (>= 2 when measured)
  nlohmann::json context = nlohmann::json::object();

  // Throws std::invalid_argument describing the first inconsistency (grid not strictly
  // ascending, fewer than 2 lengths, table shapes that do not match the grid, negative
  // or non-finite latencies).
  void validate() const;

  // The intra-op CPU threads the profile was measured with (context.intra_op_threads),
  // or 0 when the context does not say (analytic profiles, hand-written files). On a CPU
  // a layer's time depends on it by up to the thread count, so a re-measurement that
  // should be comparable has to use the same.
  int64_t measured_threads() const;
};

// The profile's "model" object: the preset name and the shape that decides a layer's cost.
nlohmann::json latency_profile_model_json(const Qwen2Config& config);

nlohmann::json latency_profile_to_json(const LatencyProfile& profile);
// `file` names the source in errors (ConfigError with the JSON path).
LatencyProfile latency_profile_from_json(const nlohmann::json& json, const std::string& file);
LatencyProfile load_latency_profile(const std::filesystem::path& path);
// Atomic (temporary file + rename).
void save_latency_profile(const LatencyProfile& profile, const std::filesystem::path& path);

}  // namespace sb
