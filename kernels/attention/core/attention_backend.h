#pragma once
// The attention-backend interface: the Qwen2 model calls one backend per run, made by
// the run's attention pattern (kernels/attention/patterns/attention_pattern.h). Backends
// differ in which keys a query attends to; the model sees only this call.

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention/core/packed_sequences.h"

namespace sb {

class CpSharding;  // kernels/attention/ring/cp_sharding.h

// What a sparse backend is asked to do for the next micro-batch: the budget that the
// budget policy (fixed k, or DST) chose, and DST's coverage floor. Backends without a
// budget (dense) ignore it.
struct AttentionBudgetRequest {
  // Budget per sequence of the packed micro-batch; empty: the backend's own default. Its
  // unit is the pattern's budget axis (attention_pattern.h, BudgetAxis).
  std::vector<int64_t> top_k;
  // DST's per-layer floor (docs: sparsebalance.md 1.5): when > 0, each layer uses
  // max(top_k, k_floor) with k_floor the smallest k whose routing-score coverage over
  // the micro-batch is >= coverage_floor_ratio * C(coverage_reference_k).
  // coverage_floor_ratio = 1 - p; 0 disables the floor. A pattern whose reference is its
  // own selection rule (budget axis kKeptKeys) ignores coverage_reference_k.
  double coverage_floor_ratio = 0.0;
  int64_t coverage_reference_k = 0;
  // > 0: each layer also reports the micro-batch's coverage curve C(1) .. C(this)
  // (evaluation only; the budgets are unchanged).
  int64_t coverage_curve_up_to = 0;
};

// What a sparse backend did in one layer for the current micro-batch.
struct AttentionLayerStats {
  int64_t layer = -1;
  std::vector<int64_t> top_k;    // effective budget per sequence (after the floor)
  std::vector<double> coverage;  // routing-score coverage C(k) per sequence
  double coverage_mean = 0.0;    // C(k) over all (head, query block) of the micro-batch
  int64_t k_floor = 0;           // DST's coverage floor of this layer (0: no floor requested)
  // The budget the backend's own rule chose per sequence, before any request (budget axis
  // kKeptKeys: the kept keys per query of the pattern's rule, DST's reference there);
  // empty for backends whose reference is the requested k0 (kKeyBlocks).
  std::vector<int64_t> reference_top_k;
  // coverage_curve[k - 1] = C(k) over the micro-batch, k = 1 .. min(requested, K) with K
  // the most eligible blocks of a query block (C = 1 from K on); empty unless requested.
  std::vector<double> coverage_curve;
};

// A backend's statistics, kept by layer (a layer run again replaces its entry): taken in
// layer order, and the map emptied (AttentionBackend::take_layer_stats).
inline std::vector<AttentionLayerStats> take_stats_by_layer(std::map<int64_t, AttentionLayerStats>& by_layer) {
  std::vector<AttentionLayerStats> taken;
  taken.reserve(by_layer.size());
  for (auto& [layer, stats] : by_layer) taken.push_back(std::move(stats));
  by_layer.clear();
  return taken;
}

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;
  virtual std::string name() const = 0;
  // q [T, Hq, D]; k, v [T, Hkv, D] with Hq % Hkv == 0 (grouped-query attention:
  // query head h reads key/value head h / (Hq / Hkv)). Returns [T, Hq, D] in q's
  // dtype. Differentiable through autograd with respect to q, k and v.
  // layer: the calling decoder layer's index in the whole model (statistics are kept
  // per layer; a layer run again, e.g. recomputed under activation checkpointing,
  // replaces its earlier entry).
  virtual at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const PackedSequences& sequences, double scale,
                             int64_t layer) = 0;

  // The budget for the micro-batches that follow (until the next call).
  virtual void set_budget_request(const AttentionBudgetRequest& /*request*/) {}
  // Under context parallelism: how the micro-batch whose tokens the following calls see
  // is dealt over the CP ranks (null: whole micro-batches). Backends that do not run
  // under CP throw std::logic_error for a non-null sharding.
  virtual void set_context_parallel_sharding(std::shared_ptr<const CpSharding> sharding);
  // Under tensor parallelism each rank computes a share of every layer's heads: `sum`
  // adds a float64 host vector (the same length on every rank) over those ranks, so a
  // budget rule that reads the whole layer (DST's coverage floor) sees every head.
  // Backends without such a rule ignore it. Null: this rank holds all heads.
  virtual void set_head_shard_sum(std::function<void(std::vector<double>&)> /*sum*/) {}
  // The statistics of the layers run since the last call, ordered by layer; empty for
  // backends without a budget.
  virtual std::vector<AttentionLayerStats> take_layer_stats() { return {}; }

  // Incremental decoding of ONE sequence with a key/value cache: the n new queries
  // sit at positions [L - n, L) and attend causally to the L keys of the cache (the
  // cache already holds the new tokens' keys). q [n, Hq, D]; k, v [L, Hkv, D] with
  // L >= n. Returns [n, Hq, D]. Used under no-grad for generation.
  virtual at::Tensor forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    double scale) = 0;
};

}  // namespace sb
