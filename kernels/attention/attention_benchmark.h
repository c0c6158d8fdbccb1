#pragma once
// Timing of one attention implementation on one shape, as `sparsebalance bench
// attention` reports it: forward and forward+backward wall time over repetitions after
// warm-up (raw samples kept), the memory the timed runs held, the work done, and the
// max abs error of the output against the float64 oracle on the same input.
//
// Formulas (docs/benchmarks.md, "bench attention"):
//   attended_pairs = sum over query heads and queries of the keys the query attends to
//                    on the inputs (AttentionPattern::kept_pairs: dense causal
//                    Hq * L (L + 1) / 2, a sparse pattern's selection on these inputs)
//   fwd_flop       = 4 * head_dim * attended_pairs   (Q K^T and P V)
//   fwdbwd_flop    = 3.5 * fwd_flop                  (the backward: 5 products of that size)
//   tflops         = flop / median time

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attention/patterns/attention_pattern.h"

namespace sb {

struct AttentionBenchConfig {
  // What the result row is called ("dense", "moba-fused", "ring-moba"): the command
  // line's --impl entry.
  std::string impl = "moba";
  AttentionOptions attention;  // the pattern and its parameters
  bool ring = false;           // the context-parallel ring on one rank (CPU)
  bool sdpa_flash_only = false;  // SDPA pinned to flash-attention (sdpa_kernel_choice.h; CUDA)
  bool cuda_only = false;      // the implementation exists on CUDA only (a CUDA path forced)
  std::string device = "cpu";  // "cpu" or "cuda"
  at::ScalarType dtype = at::kFloat;
  int64_t seq_len = 8192;
  // "random": q, k, v ~ N(0, 1). "local": q and k share one direction per head, rotated
  // by RoPE at their positions, plus N(0, 1) noise, so attention depends on the offset
  // and peaks near it as a trained model's does (docs/benchmarks.md).
  std::string inputs = "random";
  int64_t q_heads = 4, kv_heads = 2, head_dim = 64;
  bool backward = false;
  int64_t repetitions = 5;
  int64_t warmup = 1;
  uint64_t seed = 0;
  // Query rows checked against the oracle (the last ones, which attend the most keys);
  // 0: as many as fit in about 1 GiB of float64 scores.
  int64_t check_rows = 0;
};

struct AttentionBenchResult {
  AttentionBenchConfig config;
  std::vector<double> fwd_ms;     // one per repetition
  std::vector<double> fwdbwd_ms;  // one per repetition; empty without backward
  // The pattern's selection alone (AttentionPattern::selection_step; under the ring its
  // selector), one per repetition, for patterns that time it apart; fwd_ms and fwdbwd_ms
  // include it, as the trainer's calls do.
  std::vector<double> index_ms;
  double attended_pairs = 0.0;
  double max_abs_err = 0.0;        // output vs float64 oracle on the checked rows
  int64_t checked_rows = 0;
  int64_t peak_mem_bytes = 0;      // most memory held by one run beyond its inputs
  std::string peak_mem_source;     // "cpu_rss" (VmHWM after clear_refs) or "cuda_allocator"
  double coverage_mean = 1.0;      // the layer's coverage (1 for a pattern without statistics)
  std::string sdpa_kernel;         // a pattern without budget (dense): the kernel SDPA ran ("cudnn", ...)

  double fwd_flop() const { return 4.0 * static_cast<double>(config.head_dim) * attended_pairs; }
  double fwdbwd_flop() const { return 3.5 * fwd_flop(); }
};

// Runs every configuration on its own inputs: first one untimed run each, alone, for
// the peak memory; then warm-up and timed repetitions in turns (config 1, 2, ..., 1, 2,
// ...), so that a change in the machine's load hits every implementation alike. Warm-up
// and repetitions come from the first configuration. Throws std::invalid_argument for a
// bad configuration (naming the flag).
std::vector<AttentionBenchResult> run_attention_benchmarks(
    const std::vector<AttentionBenchConfig>& configs);

}  // namespace sb
