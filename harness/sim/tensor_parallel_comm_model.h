#pragma once
// The tensor-parallel collectives of one micro-batch on one pipeline stage, as the trainer
// runs them (docs/tensor_parallel.md; docs/simulator.md, item 7), for the simulator and
// for the fit of the link they run over (fit/allreduce_fit.h).
//
// With sequence parallelism each decoder layer all-gathers the residual stream's rows
// before attention and before the MLP and reduce-scatters after each, [T, H] in all
// (T padded to a multiple of tp): 2 all-gathers and 2 reduce-scatters in the forward,
// and as many in the backward (each one's backward is the other). The first stage's
// vocabulary-parallel embedding reduce-scatters its output (backward: an all-gather); the
// last stage all-gathers the final norm's output for the head (backward: a
// reduce-scatter) and the vocabulary-parallel loss all-reduces [T] row maxima and [2, T]
// sums (forward only). The attention adds small all-reduces of a few float64 sums per
// layer where it reads every head (AttentionPattern::tensor_parallel_sums_per_layer). An activation-checkpointed
// layer runs its forward collectives again in the backward.
//
// Cost per rank, ring algorithm over n = tp ranks: an all-gather or a reduce-scatter of B
// bytes (the whole tensor) moves (n - 1) / n x B and takes n - 1 latency hops; an
// all-reduce twice both. Gloo has no reduce-scatter: the trainer all-reduces and keeps
// its rows (harness/parallel/tensor_parallel/tensor_parallel_group.cpp), so over Gloo a
// reduce-scatter costs an all-reduce. The attention's sums are counted by their hops
// (their payload, under a kilobyte, is left out).

#include <cstdint>

#include "harness/config/simulation_spec.h"

namespace sb {

struct CollectiveTraffic {
  double payload_bytes = 0;  // bytes one rank sends
  double latency_hops = 0;   // messages one rank waits for in turn (each costs alpha)
  double calls = 0;          // collectives (each one a `tp_comm` event in the trainer's timeline)

  CollectiveTraffic& operator+=(const CollectiveTraffic& other) {
    payload_bytes += other.payload_bytes;
    latency_hops += other.latency_hops;
    calls += other.calls;
    return *this;
  }
  // On `link`: hops x alpha + payload / bandwidth (ms).
  double ms(const LinkSection& link) const;
};

struct TensorParallelStage {
  int64_t tp = 1;
  int64_t layers = 0;               // decoder layers on the stage
  bool first_stage = false;         // holds the embedding
  bool last_stage = false;          // holds the final norm, head and loss
  bool activation_checkpointing = false;
  int64_t hidden = 0;               // hidden size
  double element_bytes = 4;         // bytes per activation element (4 fp32, 2 bf16)
  bool gloo = false;                // Gloo carries the collectives: a reduce-scatter is an all-reduce
  double attention_sums_per_layer = 0;  // the attention's small all-reduces per layer forward (its pattern's)
};


// One micro-batch of `tokens` tokens on the stage: its forward's collectives, or its
// backward's. Nothing for tp = 1.
CollectiveTraffic tensor_parallel_traffic(const TensorParallelStage& stage, int64_t tokens, bool forward);

}  // namespace sb
