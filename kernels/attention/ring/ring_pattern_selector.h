#pragma once
// What the context-parallel ring asks of an attention pattern (docs/attention_patterns.md,
// "Under context parallelism"): for each attention call, which key blocks every (query
// head, query block) of the micro-batch keeps, and which single key columns besides them,
// the same on every CP rank. The ring (ring_attention.h) then runs its steps over that
// selection; it knows nothing else of the pattern.
//
// A selector sees only this rank's tokens. A pattern whose choice reads the whole
// micro-batch (MoBA's block means, an index of the attention) completes its statistics with
// the CP group's all-reduces (RingContext::all_reduce), so every rank selects from the same
// numbers, and records that work as one event of step kRingSelectionStep (its local part
// as compute, the all-reduces as wait: ring_selection_timer.h).

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention/core/attention_backend.h"
#include "kernels/attention/ring/ring_column_step_cpu.h"
#include "kernels/attention/ring/ring_query_block_step_cpu.h"
#include "kernels/attention/ring/ring_step_cpu.h"

namespace sb {

class RingContext;   // ring_attention.h
struct RingGeometry;  // ring_attention.h

// One call's selection.
struct RingCallPattern {
  RingBlockPattern blocks;  // key blocks per (head, query block), the diagonal causal
  // Key columns kept outside `blocks` (null: none): run as a second partial per step.
  std::shared_ptr<const RingColumnLists> columns;
  // Key blocks kept per query of this rank outside `blocks` (null: none): run as a
  // further partial per step, on the CPU ring.
  std::shared_ptr<const RingQueryBlockLists> query_blocks;
  // The layer's statistics, the same on every CP rank (layer < 0: the pattern keeps none).
  AttentionLayerStats stats;
};

// What a selection reads. q [n, Hq, D], k [n, Hkv, D]: this rank's tokens of the
// geometry's micro-batch, on the CPU or a GPU.
struct RingSelectionInputs {
  const at::Tensor& q;
  const at::Tensor& k;
  const RingGeometry& geometry;
  const AttentionBudgetRequest& request;
  double scale;
  int64_t layer;
  RingContext& context;
  int64_t call;  // the attention call (RingContext::next_call), for the all-reduces' messages and events
  // Tensor parallelism beside CP (AttentionBackend::set_head_shard_sum): sums a host
  // vector over the TP ranks' head shards. Null: this rank holds every head.
  const std::function<void(std::vector<double>&)>& head_shard_sum;
};

class RingPatternSelector {
 public:
  virtual ~RingPatternSelector() = default;
  // The pattern's name (the ring backend reports it as its own).
  virtual std::string name() const = 0;
  // Tokens per attention block: the grid the geometry's tiles are cut on.
  virtual int64_t block_size() const = 0;
  // The call's selection. Every rank of the group calls it with the same geometry and
  // request, in the same order as its other ring calls.
  virtual RingCallPattern select(const RingSelectionInputs& in) = 0;
};

}  // namespace sb
