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
//    "model": {"preset": ..., "from": folder (optional), "hidden_size": ..., ...},
//    "attention": {"name": ..., "block_size": ..., and the pattern's other profile fields
//                  (AttentionPattern::profile_fields; integers)},
//    "device": "cpu" | "cuda",
//    "training": {"precision": "fp32" | "bf16-mixed", "activation_checkpointing": bool,
//                 "lora": null | {"rank": r, "alpha": a, "dropout": p, "target_modules": [...]},
//                 "tensor_parallel": tp (only when > 1),
//                 "tensor_parallel_collectives": "gloo" | "nccl" (only when timed with them),
//                 "context_parallel": {"size": cp, "layout": ..., "stripe_tokens": n, "inner": n,
//                                      "collectives": "gloo" | "nccl"} (only when cp > 1;
//                                      collectives absent: gloo)},
//    "warmup": n, "repetitions": n,
//    "seq_lens": [ascending], "budgets": [ascending; [0] for a pattern without budget;
//                on the pattern's budget axis (kernels/attention/core/budget_axis.h)],
//    "layer_ms": {"median": [[len][budget]], "spread": [[...]], "samples": [[[...]]]},
//    "rest_ms":  {"median": [len], "spread": [len], "samples": [[...]]},
//    "head_ms":  {"median": [len], "spread": [len], "samples": [[...]]},
//    "model_ms": {"median": [len], "spread": [len], "samples": [[...]]}, "model_budget": k  (optional),
//    "packed_ms": {"median": [m], "spread": [s], "samples": [[...]]}, "packed_count": n  (optional),
//    "context": {...}}
// "spread" is the interquartile range of the repetitions (ms). A profile on the kept-keys
// budget axis has "kept_keys_per_query" [len][budget] in its context: the kept keys each
// layer point ran (a budget below what the pattern's forced keys keep runs at that minimum). A measured profile's
// context also says what was timed: "timed_layer" {"parameters", "trainable_parameters",
// "lora_targets", "activation_checkpointing"}, read from the timed layer itself.
// "model.preset" is the architecture's name (a preset, or the basename of a Hugging Face
// folder); "model.from" is the folder a profile of a pretrained model was measured from,
// so that `profile --check` can build the same model again. Profiles written before
// "training" existed read as fp32 (or their "context.precision"), without activation
// checkpointing, full fine-tuning: how they were measured.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/attention/ring/cp_sharding.h"
#include "models/qwen2/qwen2_config.h"
#include "models/qwen2/qwen2_lora.h"
#include "models/qwen2/qwen2_precision.h"

namespace sb {

struct LatencyStat {
  double median = 0;
  double spread = 0;            // interquartile range
  std::vector<double> samples;  // raw repetitions (ms); empty for analytic profiles
};

// Median and interquartile range (linear interpolation between order statistics) of
// samples; samples must be non-empty.
LatencyStat latency_stat_from_samples(std::vector<double> samples);

// How the run a profile is for trains: what, beyond the architecture, the attention and
// the device, changes a layer's forward + backward time, so a run may use only a profile
// measured with the same (method_profiles.h checks it):
//   precision                 bf16-mixed autocast runs the matmuls in bfloat16;
//   activation_checkpointing  each layer's forward runs again in the backward;
//   lora                      the base is frozen, so the backward computes no weight
//                             gradients of it (about a third of a layer's matmul work)
//                             and the adapters add small rank-r matmuls. Its alpha and
//                             dropout are recorded but do not change the time.
struct LatencyProfileTraining {
  Qwen2Precision precision = Qwen2Precision::kFloat32;
  bool activation_checkpointing = false;
  std::optional<Qwen2LoraOptions> lora;  // absent: full fine-tuning
  // Tensor parallelism: the timed layer is one TP rank's share of it
  // (qwen2_tensor_parallel_rank_config: heads, MLP columns and vocabulary / tp). 1: the
  // whole layer.
  int64_t tensor_parallel = 1;
  // With tp > 1, the collectives the TP ranks timed together ran over ("gloo" or "nccl"):
  // each point is a TP-sharded layer with its sequence-parallel gathers and scatters, the
  // attention's head-shard sums and (head, model) the vocabulary-parallel loss, the
  // slowest TP rank's time. "": one rank's share timed alone, without them (profiles
  // measured before sparsebalance launched TP ranks for them; they under-predict every
  // micro-batch by its collectives).
  std::string tensor_parallel_collectives;
  // Context parallelism: > 1 when the context_parallel CP ranks timed every point
  // together, each micro-batch dealt to them by cp_layout and attention a ring over them
  // (cp_inner ranks per inner ring, 0 flat), each repetition the slowest rank's time: a
  // point is one CP micro-batch. 1: one rank ran the whole micro-batch.
  int64_t context_parallel = 1;
  CpLayout cp_layout;
  int64_t cp_inner = 0;
  // With cp > 1, what the ring ran over: "gloo" (the CPU, and GPUs sharing one device
  // through host memory) or "nccl" (between GPUs).
  std::string context_parallel_collectives = "gloo";
};

// "fp32, no activation checkpointing, full fine-tuning" and the like, for messages.
std::string latency_profile_training_text(const LatencyProfileTraining& training);
// "full fine-tuning" or "LoRA rank 8 on q_proj, v_proj".
std::string latency_profile_lora_text(const std::optional<Qwen2LoraOptions>& lora);

nlohmann::json latency_profile_training_to_json(const LatencyProfileTraining& training);
// `path` and `file` name the object in ConfigErrors (unknown keys, bad values).
LatencyProfileTraining latency_profile_training_from_json(const nlohmann::json& json, const std::string& path,
                                                          const std::string& file);

struct LatencyProfile {
  std::string kind = "measured";  // "measured" or "analytic" (computed, not timed)
  nlohmann::json model = nlohmann::json::object();
  std::string attention;  // the pattern's name ("moba")
  // What the profile recorded of the pattern besides its name: the parameters a layer's
  // time depends on (AttentionPattern::profile_fields: "block_size", 0 for dense, and the
  // like). A profile serves a run whose pattern has the same.
  std::map<std::string, int64_t> attention_fields;
  std::string device = "cpu";
  LatencyProfileTraining training;  // how the timed layer was trained (see above)
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
  // attention_fields' "block_size" (0 when it has none).
  int64_t block_size() const;
};

// The profile's "model" object: the architecture's name ("preset": config.name) and the
// shape that decides a layer's cost.
nlohmann::json latency_profile_model_json(const Qwen2Config& config);
// The fields of a "model" object that describe the architecture (all but "preset" and
// "from", which only name it): two models with the same architecture have the same
// timings, whether named by a preset or read from a folder.
nlohmann::json latency_profile_architecture(const nlohmann::json& model);

// The "attention" object: {"name"} and the attention fields.
nlohmann::json latency_profile_attention_json(const LatencyProfile& profile);
nlohmann::json latency_profile_to_json(const LatencyProfile& profile);
// `file` names the source in errors (ConfigError with the JSON path).
LatencyProfile latency_profile_from_json(const nlohmann::json& json, const std::string& file);
LatencyProfile load_latency_profile(const std::filesystem::path& path);
// Atomic (temporary file + rename).
void save_latency_profile(const LatencyProfile& profile, const std::filesystem::path& path);

}  // namespace sb
