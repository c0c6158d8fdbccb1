#pragma once
// Event model of one micro-batch's decoder layers on the CP ranks of one pipeline stage:
// per layer, each rank's compute outside attention, then the ring attention of
// kernels/attention/ring/ring_attention.cpp step by step, with the same message order
// (docs/simulator.md, "Context parallelism"):
//
//   ranks    CP rank r = g x inner + i: position i in inner ring g; groups = cp / inner
//            (inner = cp: one flat ring). At step t = o x inner + s (round o, inner step
//            s) rank r computes against the shard of rank ((g - o) mod groups, (i - s) mod
//            inner).
//   forward  a round starts by posting the outer transfer (its shard to (g + 1, i), the
//            next round's from (g - 1, i)); each step posts the inner transfer of the
//            shard it holds, computes, then waits for the next shard (the last step of a
//            round also for the next round's outer shard, so an outer transfer overlaps
//            the whole inner ring).
//   backward as the forward, and after each step's compute the visiting shard's dK/dV
//            accumulator moves to the next inner rank (posted after the compute, waited
//            for at once: not overlapped); after a round the accumulator goes to the next
//            group, which adds it in the next round; after the last round it comes home.
//   messages a message starts when both its sender and its receiver have posted it and
//            takes alpha + bytes / bandwidth over the link between the two ranks (no link
//            contention is modelled: inner and outer transfers proceed side by side).
//   MoBA     before each layer's ring forward all ranks meet in the all-reduce of the
//            block means (layer_sync_ms).
// Ranks enter the micro-batch together; its time is the last rank's end, forward and
// backward separately (the backward runs the layers in reverse with the backward costs).

#include <cstdint>
#include <functional>
#include <vector>

namespace sb {

struct RingTimingInput {
  int64_t cp = 1;
  int64_t inner = 1;   // ranks per inner ring; cp for a flat ring
  int64_t layers = 0;  // decoder layers of the stage
  // One layer's ring step compute (ms): [r][b] rank r's queries against rank b's shard.
  std::vector<std::vector<double>> forward_step_ms;
  std::vector<std::vector<double>> backward_step_ms;
  // One layer's compute outside attention, per rank (ms).
  std::vector<double> forward_rest_ms;
  std::vector<double> backward_rest_ms;
  // Once per micro-batch, per rank: before the layers (forward) / after them (backward),
  // as the embedding; and after them (forward) / before them (backward), as the head.
  std::vector<double> forward_outside_ms;
  std::vector<double> backward_outside_ms;
  std::vector<double> forward_head_ms;   // empty: none
  std::vector<double> backward_head_ms;  // empty: none
  double layer_sync_ms = 0;  // per layer before the forward ring; 0: none
  // Time (ms) of one message from CP rank `from` to `to` carrying `bytes`.
  std::function<double(int64_t from, int64_t to, double bytes)> transfer_ms;
  std::vector<double> shard_bytes;  // [r] rank r's keys and values (= its dK/dV accumulator)
};

struct RingTiming {
  double forward_ms = 0;   // first rank's start to the last rank's end
  double backward_ms = 0;
  std::vector<double> attention_ms;  // [r] ring step compute, all layers, forward + backward
  std::vector<double> wait_ms;       // [r] waits inside the rings (transfers, other ranks)
};

// Throws std::invalid_argument when sizes disagree or cp is not a multiple of inner.
RingTiming simulate_ring_microbatch(const RingTimingInput& input);

}  // namespace sb
