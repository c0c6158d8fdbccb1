#pragma once
// MoBA (Mixture of Block Attention) over packed sequences: the kernel-level entry point.
// The rules (docs/sparsebalance.md 1.1, "MoBA rules", and 1.5):
// - keys of each sequence are cut into blocks of block_size tokens (the last may be
//   partial); packed sequences never see each other.
// - gate score of key block j, per query head h, g(h) = h / (Hq / Hkv), no softmax scale,
//   computed in float64 in every implementation. A routing row is what one choice holds
//   for (MobaParams::gate): a query token t (kToken: s_j = q_t[h] . mean(K_j[g(h)])), or
//   a query block i (kBlock: s_j = mean(Q_i[h]) . mean(K_j[g(h)])).
// - the row's own (diagonal) block is always selected (causal inside); future blocks
//   never (causal); then the top-(k-1) earlier blocks by s_j. Ties: the lower block
//   index wins.
// - coverage: pi_j = softmax over the eligible blocks of s_j; C = sum of pi_j over the
//   selected blocks, averaged over (head, row): per sequence and over the call.
// - coverage floor (DST): k_floor = the smallest k whose call-wide C(k) (the same k for
//   every sequence) is >= ratio * C(reference_k); sequence s then uses max(k_s, k_floor).
// - coverage curve (evaluation): the call-wide C(k) for k = 1 .. K, from the same sorted
//   gate weights the floor reads (what `eval` reports as the routing's concentration).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/attention/patterns/moba/moba_cuda_kernel.h"
#include "kernels/attention/patterns/moba/moba_gate.h"
#include "kernels/attention/core/block_layout.h"
#include "kernels/attention/core/packed_sequences.h"

namespace sb {


struct MobaParams {
  int64_t block_size = 256;
  MobaGate gate = MobaGate::kBlock;  // what a routing row is: a query block or a token
  // Budget k per sequence (diagonal included); one value applies to every sequence.
  // k at or above a query block's eligible block count means dense attention there.
  std::vector<int64_t> top_k{32};
  bool causal = true;  // false: every block of the sequence is eligible, none masked
  double scale = 0.0;  // softmax scale of the attention scores (> 0)
  // DST floor: 0 disables; else in (0, 1] with coverage_reference_k >= 1.
  double coverage_floor_ratio = 0.0;
  int64_t coverage_reference_k = 0;
  // > 0: also return the call-wide coverage curve C(1) .. C(min(this, K)), K = the most
  // eligible blocks of any query block (C(k) = 1 from K on). Changes nothing chosen.
  int64_t coverage_curve_up_to = 0;
  // Under tensor parallelism (the call holds this rank's heads only): adds a vector over
  // the ranks that hold the layer's other heads. The call-wide coverage curve (DST's
  // floor and the returned curve) is then that of every head, the same on every rank.
  // Null: the call holds every head.
  std::function<void(std::vector<double>&)> sum_over_head_shards;
  MobaCudaKernel cuda_kernel = MobaCudaKernel::kAuto;
};

// What the gate chose: the same on every device (CPU tensors for CPU inputs, device
// tensors for CUDA inputs); statistics on the host.
struct MobaRouting {
  MobaGate gate = MobaGate::kBlock;
  // Rows R: the query blocks (kBlock, R = NB) or the query tokens (kToken, R = Tq).
  at::Tensor selected;        // [Hq, R, kcap] int32: global block ids, ascending, -1 padding
  at::Tensor selected_count;  // [Hq, R] int32 (0 for blocks without queries)
  std::vector<int64_t> top_k;    // effective budget per sequence: max(k_s, k_floor)
  std::vector<double> coverage;  // C per sequence (1 for a sequence without queries)
  double coverage_mean = 1.0;    // C over every (head, query block) of the call
  int64_t k_floor = 0;           // 0 when the floor is disabled
  // coverage_curve[k - 1] = C(k) over the call (every head and query block of every
  // sequence, one k for all); empty unless coverage_curve_up_to > 0.
  std::vector<double> coverage_curve;
};

struct MobaResult {
  at::Tensor out;  // [Tq, Hq, D] in q's dtype; differentiable with respect to q, k, v
  at::Tensor lse;  // [Tq, Hq] float32 (float64 for float64 input): log-sum-exp of the
                   // scaled scores over the attended keys (what the backward needs)
  MobaRouting routing;
};

// Training: q [T, Hq, D], k, v [T, Hkv, D] hold the same packed tokens.
MobaResult moba_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const PackedSequences& sequences, const MobaParams& params);

// General form: q holds, for every sequence s, the queries at its LAST
// query_sequences.length(s) positions; k, v hold all keys (key_sequences). Used for
// decoding with a cache; the gate's query side is the mean of the queries present in
// the call under the block gate (docs/sparsebalance.md 1.1, "MoBA decoding rule"); the
// token gate routes each query by itself, as in training.
MobaResult moba_attention_packed(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const PackedSequences& query_sequences,
                                 const PackedSequences& key_sequences, const MobaParams& params);

// ---- pieces shared by the implementations -----------------------------------------

// params.top_k expanded to one budget per sequence; throws std::invalid_argument on a
// wrong count or a value < 1, or an invalid floor.
std::vector<int64_t> moba_budgets_per_sequence(const MobaParams& params, int64_t num_sequences);

// call_coverage[k - 1] = C(k) over the call for k = 1 .. K (K = the most eligible
// blocks of any query block; C(k) = C(K) beyond). Returns the smallest k with
// C(k) >= ratio * C(min(reference_k, K)); 1 for an empty curve (no query block).
int64_t moba_coverage_floor_k(const std::vector<double>& call_coverage, double ratio,
                              int64_t reference_k);

// How far the call-wide curve must be summed for params: up to coverage_reference_k when
// the floor is on, up to coverage_curve_up_to when the curve is asked for, never past
// most_eligible (0: neither is needed).
int64_t moba_call_coverage_extent(const MobaParams& params, int64_t most_eligible);

// Grain for at::parallel_for over items of about work_per_item multiply-adds: a call
// with little work stays on the calling thread (waking the pool costs more).
int64_t moba_parallel_grain(int64_t work_per_item);

// The block gate's routing on the host: the CPU implementation of the gate, top-k and
// coverage. q [Tq, Hq, D], k [Tk, Hkv, D] on the CPU. (The token gate's routing:
// moba_token_routing.h.)
MobaRouting moba_route_cpu(const at::Tensor& q, const at::Tensor& k, const BlockLayout& layout,
                           const MobaParams& params);

// The same routing from block means computed elsewhere (under context parallelism each
// rank sums its own tokens and one all-reduce completes the sums, so every rank routes
// identically): query_means [Hq, NB, D] (mean of each block's queries; zeros for a block
// without them), key_means [Hkv, NB, D], contiguous float64 on the CPU.
MobaRouting moba_route_from_means(const at::Tensor& query_means, const at::Tensor& key_means,
                                  const BlockLayout& layout, const MobaParams& params);

}  // namespace sb
