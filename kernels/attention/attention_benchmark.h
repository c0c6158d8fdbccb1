#pragma once
// Timing of one attention implementation on one shape, as `sparsebalance bench
// attention` reports it: forward and forward+backward wall time over repetitions after
// warm-up (raw samples kept), the memory the timed runs held, the work done, and the
// max abs error of the output against the float64 oracle on the same input.
//
// Formulas (docs/benchmarks.md, "bench attention"):
//   attended_pairs = sum over query heads and queries of the keys the query attends to
//                    (dense causal: Hq * L (L + 1) / 2; MoBA: from its routing;
//                    vertical-slash: its mask's entries)
//   fwd_flop       = 4 * head_dim * attended_pairs   (Q K^T and P V)
//   fwdbwd_flop    = 3.5 * fwd_flop                  (the backward: 5 products of that size)
//   tflops         = flop / median time

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sb {

struct AttentionBenchConfig {
  // "dense" (SDPA's choice of kernel), "dense-flash" (SDPA pinned to flash-attention,
  // CUDA), "moba", "moba-fused", "moba-varlen" (CUDA paths), "ring-dense", "ring-moba",
  // "vertical_slash"
  std::string impl = "moba";
  std::string device = "cpu";  // "cpu" or "cuda"
  at::ScalarType dtype = at::kFloat;
  int64_t seq_len = 8192;
  int64_t block = 64;
  int64_t top_k = 8;
  // vertical_slash: top-k counts besides the 30 sink columns and the 100-offset window,
  // or top-p of each list's mass where vs_p > 0; slashes expand to vs_block-token blocks.
  int64_t vs_verticals = 1000, vs_slashes = 2000, vs_block = 64;
  double vs_p = 0.0;
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
  // vertical_slash: the index alone (vertical_slash_index on the inputs), one per
  // repetition; fwd_ms and fwdbwd_ms include it, as the trainer's calls do.
  std::vector<double> index_ms;
  double attended_pairs = 0.0;
  double max_abs_err = 0.0;        // output vs float64 oracle on the checked rows
  int64_t checked_rows = 0;
  int64_t peak_mem_bytes = 0;      // most memory held by one run beyond its inputs
  std::string peak_mem_source;     // "cpu_rss" (VmHWM after clear_refs) or "cuda_allocator"
  double coverage_mean = 1.0;      // MoBA's routing-score coverage (1 for dense)
  std::string sdpa_kernel;         // dense: the kernel SDPA ran ("cudnn", "flash", ...)

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
