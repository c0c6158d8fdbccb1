#pragma once
// What one rank of a run needs in memory, estimated from the manifest before anything
// starts (docs/memory.md, "The estimate"): per pipeline stage (every DP, CP and TP rank
// of a stage needs the same), for the manifest's largest micro-batch
// (train.max_tokens_per_microbatch tokens):
//   weights          the stage's parameters on this TP rank (LoRA's adapters included),
//                    float32 (bf16-mixed keeps float32 master weights; autocast adds a
//                    bfloat16 copy of every matmul weight per micro-batch in flight:
//                    weight_casts)
//   gradients        one float32 value per trained parameter (the flat all-reduce buckets)
//   optimizer        AdamW's two float32 moments per trained parameter
//   activations      what autograd keeps of each micro-batch in flight (1F1B: stage s of
//                    p holds up to p - s, no more than a DP rank's samples), layer by layer as this implementation saves it
//                    (the terms in docs/memory.md); with activation checkpointing each
//                    layer's input, plus one layer's whole set during its recomputation
//   loss             the last stage's fused head and cross-entropy: two chunks of
//                    float32 logits and the head's weight gradient
//   backward         the largest gradient temporaries of one layer's backward
//   communication    pipeline receive buffers (pp > 1)
//   allocator        host processes only: what glibc keeps of freed temporaries, a quarter of
//                    the activations (our rule, measured: docs/memory.md)
//   runtime          what the process holds besides tensors (on the CPU the resident
//                    LibTorch runtime, measured by the caller; on a GPU outside the
//                    caching allocator, so 0 there)
// The attention is modelled as flash-style (q, k, v, the output and its log-sum-exp
// saved; no [T, T] scores): true of SDPA, the fused block-sparse kernels and the ring.

#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "harness/config/manifest.h"

namespace sb {

struct StageMemoryEstimate {
  int64_t stage = 0;
  int64_t layers = 0;
  int64_t microbatches_in_flight = 1;
  double weights = 0, weight_casts = 0, gradients = 0, optimizer = 0;  // bytes
  double activations = 0;        // all micro-batches in flight
  double activations_per_layer = 0;  // one micro-batch, one layer, not checkpointed
  double loss = 0, backward = 0, communication = 0, allocator = 0, runtime = 0;
  double total() const;
};

struct MemoryEstimate {
  int64_t tokens = 0;        // the micro-batch estimated for (all CP ranks together)
  int64_t rank_tokens = 0;   // this rank's share under context parallelism
  std::vector<StageMemoryEstimate> stages;
  const StageMemoryEstimate& largest() const;
};

// What the estimate is compared with: a CPU process's resident set (the allocator and
// runtime terms count), or a GPU's caching allocator (they do not; a simulated cluster).
enum class MemoryTarget { kHostProcess, kDevice };

// `runtime_bytes`: the runtime term of every stage (kHostProcess only).
MemoryEstimate estimate_rank_memory(const Manifest& manifest, MemoryTarget target, double runtime_bytes = 0.0);

// Lines for the console: the largest stage's terms in GiB, one line per stage when pp > 1.
std::string describe_memory_estimate(const MemoryEstimate& estimate, const std::string& device_label);

// On a CUDA device: throws ConfigError (naming the manifest, train.max_tokens_per_microbatch
// and the knobs that lower the need) when this rank's stage needs more than the device's
// free memory now; nothing on the CPU, where the kernel pages out or kills instead.
// `local_ranks`: the ranks on this host. Where they share the GPUs (train.collectives
// "gloo": local rank r on GPU r mod the visible ones) each of a GPU's ranks is assumed to
// need the largest stage's estimate.
void check_memory_fits_device(const Manifest& manifest, int64_t stage, const c10::Device& device,
                              int64_t local_ranks);

}  // namespace sb
