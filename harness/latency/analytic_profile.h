#pragma once
// An analytic latency profile: the same table a measured profile holds, computed from
// FLOP counts at a stated efficiency, for hardware nobody here has (the simulator's
// paper-scale manifests use it until a GPU-measured profile exists). Reports label it
// "analytic"; it is a model, not a measurement.
//
// FLOPs of one decoder layer (H hidden, Hq / Hkv heads of dim D, I intermediate):
//   linear, forward, per token   2 (H Hq D + 2 H Hkv D + Hq D H + 3 H I)
//   attention, forward           4 D Hq x (query, key) pairs attended
//     (AttentionPattern::attended_pairs at the budget), plus the pattern's selection
//     (AttentionPattern::selection_forward_flops: MoBA's gate scores, an index), counted
//     with the attention's backward factor (an overestimate of a selection without
//     backward). The pairs and selections of each pattern: docs/attention_patterns.md.
//   head, forward, per token     2 H V (final norm ignored)
// Forward + backward = 3 x forward for linear work and the head (two matmuls per
// forward one), 3.5 x forward for attention (flash-style backward recomputes QK^T).
// Time = FLOPs / (peak x efficiency); matmul and attention work have their own
// efficiency.

#include <cstdint>
#include <string>
#include <vector>

#include "harness/latency/latency_profile.h"
#include "kernels/attention/patterns/attention_pattern.h"
#include "models/qwen2/qwen2_config.h"

namespace sb {

struct DeviceThroughput {
  std::string name;
  double peak_tflops = 0;            // dense bf16 tensor-core peak
  double matmul_efficiency = 0.5;    // share of peak the linear layers reach
  double attention_efficiency = 0.3; // share of peak the (sparse) attention kernels reach
};

// Documented presets (peak dense bf16 from the vendors' data sheets):
//   h200  989 TFLOP/s (H200 SXM)   h20  148 TFLOP/s   a100  312 TFLOP/s (A100 SXM)
// with matmul efficiency 0.5 and attention efficiency 0.3, assumptions of this project.
DeviceThroughput device_throughput_preset(const std::string& name);
std::vector<std::string> device_throughput_preset_names();

double layer_linear_forward_flops_per_token(const Qwen2Config& config);
// One sequence of `length` tokens at `budget` (on the pattern's axis).
double layer_attention_forward_flops(const Qwen2Config& config, const AttentionPattern& pattern, int64_t length,
                                     int64_t budget);

// The profile over the grid (budgets ignored, [0], for a pattern without budget); the
// pattern's profile fields are copied into it.
LatencyProfile make_analytic_profile(const Qwen2Config& config, const AttentionPattern& pattern,
                                     const std::vector<int64_t>& seq_lens, const std::vector<int64_t>& budgets,
                                     const DeviceThroughput& device);

}  // namespace sb
