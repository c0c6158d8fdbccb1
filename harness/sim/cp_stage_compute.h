#pragma once
// What one micro-batch computes on each CP rank of one pipeline stage, from the latency
// profile and the ring's work model (docs/simulator.md, "Context parallelism"):
//
//   A            = packed_attention_ms(attention_ms(L_i, k_i) for each sequence i): the
//                  micro-batch's attention per layer on one device, forward + backward
//   step r <- b  = ring_compute_factor x A x pairs[r][b] / total pairs   (the pattern's
//                  ring work: AttentionSimulation::ring_work)
//                  + ring_step_ms_per_token x T_r (what every step costs whatever its
//                  pairs: merging the partial output of the rank's T_r queries, visiting
//                  their rows), T_r the tokens rank r holds
//   rest of r    = rest_ms(T_r) per layer
//   outside of r = microbatch_overhead_share_ms(T_r, stage, pp) (signed), before the
//                  layers; head_ms(T_r) on the last stage when the predictor includes the
//                  head, after them (forward) and before them (backward)
//   each split into forward_fraction / (1 - forward_fraction), all x the latency noise
//   shard bytes  = T_r x kv_heads / tp x head_dim x 2 (keys and values) x act_bytes
//   under TP every compute term x compute_scale (one TP rank's heads, MLP columns and
//   vocabulary); the TP collectives are the caller's (tensor_parallel_comm_model.h)
//
// ring_compute_factor and ring_step_ms_per_token (simulation.ring_compute) say what the
// ring's kernels cost against the profile's single-device attention term for the same
// pairs: 1 and 0 by default, or fitted to measured CP runs
// (harness/sim/fit/ring_compute_fit.h), which is why the terms are also returned apart.

#include <cstdint>
#include <vector>

#include "harness/config/manifest.h"
#include "harness/latency/latency_predictor.h"
#include "harness/patterns/attention_simulation.h"
#include "harness/sim/ring_timing_model.h"
#include "kernels/attention/ring/ring_work.h"

namespace sb {

struct CpComputeSpec {
  int64_t cp = 1;
  int64_t inner = 1;  // ranks per inner ring (cp: flat)
  CpLayout layout;
  int64_t query_heads = 1;  // the whole layer's (the work counts every head's pairs)
  int64_t kv_heads = 1;
  int64_t tp = 1;           // tensor parallelism beside CP: each TP rank's ring carries kv_heads / tp
  double compute_scale = 1.0;  // one TP rank's share of the profile's compute: 1 / tp, or 1 for
                               // a profile measured for the run's tp
  int64_t head_dim = 1;
  double act_bytes = 4;  // bytes per key/value element on the wire
  double forward_fraction = 1.0 / 3.0;
  double ring_compute_factor = 1.0;
  double ring_step_ms_per_token = 0.0;  // one step, one layer, forward + backward
};

// The spec of a manifest's runs: its parallelism, attention and model; the factor and
// the forward fraction of its simulation block (defaults without one). profiled_tp: the
// tensor parallelism the latency profile was measured for (1: the whole layer).
CpComputeSpec cp_compute_spec(const Manifest& manifest, int64_t profiled_tp);

// What a micro-batch's stages share: the ring's work and the profile's attention term A
// (one layer, forward + backward, on one device). Computed once per micro-batch.
struct CpMicrobatch {
  RingWork work;
  double attention_ms = 0;
};

// lengths / budgets: the micro-batch's sequences and their effective budgets
// (AttentionSimulation::micro_batch's sequence_budgets), the work `attention`'s.
CpMicrobatch cp_microbatch(const LatencyPredictor& predictor, const CpComputeSpec& spec,
                           const AttentionSimulation& attention, const std::vector<int64_t>& lengths,
                           const std::vector<int64_t>& budgets);

struct CpStageCompute {
  RingTimingInput timing;        // transfer_ms and layer_sync_ms left for the caller
  // Per CP rank, summed over the stage's layers, forward + backward, without noise:
  std::vector<double> attention_unit_ms;  // the ring steps' pair term at factor 1
  std::vector<double> step_tokens;        // layers x cp steps x T_r (the per-token term's units)
  std::vector<double> other_ms;           // the rest and outside terms
};

// layers: the stage's decoder layers; noise: the latency noise factor (1: none).
CpStageCompute cp_stage_compute(const LatencyPredictor& predictor, const CpComputeSpec& spec,
                                const CpMicrobatch& microbatch, int64_t layers, int64_t stage, int64_t stages,
                                double noise);

}  // namespace sb
