#pragma once
// Shared by the ring attention tests (one process composing the steps, and the
// multi-process workers): the cases, their inputs and the one-rank float64 oracle.

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention/core/attention_backend.h"
#include "kernels/attention/patterns/dense/dense_ring_selector.h"
#include "kernels/attention/patterns/moba/moba_reference.h"
#include "kernels/attention/patterns/moba/moba_ring_selector.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_selector.h"
#include "kernels/attention/ring/cp_sharding.h"
#include "kernels/attention/ring/ring_attention.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_reference.h"

namespace sb::test {

// Lengths not divisible by cp x block, a sequence shorter than one block per rank.
inline const std::vector<int64_t>& ring_sequence_lengths() {
  static const std::vector<int64_t> lengths{97, 61, 30, 7};
  return lengths;
}
constexpr int64_t kRingQHeads = 4, kRingKvHeads = 2, kRingHeadDim = 8, kRingBlock = 16;

struct RingCase {
  std::string name;
  CpLayout layout;
  bool moba = false;
  at::ScalarType dtype = at::kDouble;
  int64_t inner = 0;  // 0: flat ring
  std::vector<int64_t> lengths = ring_sequence_lengths();
  bool vertical_slash = false;  // MTraining's pattern (ring_vertical_slash_params)
  MobaGate gate = MobaGate::kBlock;  // MoBA's gate (moba cases)
  bool dst = false;                  // MoBA under ring_moba_dst_request (budgets per sequence, a floor)
};

// Every layout (stripes inside one MoBA block, and across blocks), dense and MoBA,
// float64 and float32; hierarchical variants where cp = 4.
inline std::vector<RingCase> ring_cases(int64_t cp) {
  std::vector<RingCase> cases;
  const std::vector<std::pair<std::string, CpLayout>> layouts{
      {"contiguous", {CpLayoutKind::kContiguous, 0}},
      {"zigzag", {CpLayoutKind::kZigzag, 0}},
      {"striped8", {CpLayoutKind::kStriped, 8}},
      {"striped24", {CpLayoutKind::kStriped, 24}}};
  for (const auto& [layout_name, layout] : layouts) {
    for (bool moba : {false, true}) {
      for (at::ScalarType dtype : {at::kDouble, at::kFloat}) {
        cases.push_back({layout_name + (moba ? "_moba" : "_dense") + (dtype == at::kDouble ? "_f64" : "_f32"),
                         layout, moba, dtype, 0});
      }
    }
  }
  for (const auto& [layout_name, layout] : layouts) {
    for (at::ScalarType dtype : {at::kDouble, at::kFloat}) {
      cases.push_back({layout_name + "_vs" + (dtype == at::kDouble ? "_f64" : "_f32"), layout, false, dtype, 0,
                       ring_sequence_lengths(), true});
    }
  }
  // MoBA's token gate: float64 under DST's budgets and floor (the floor's curve and the
  // coverage summed over the ranks), float32 at the default k.
  for (const auto& [layout_name, layout] : layouts) {
    cases.push_back({layout_name + "_moba_token_dst_f64", layout, true, at::kDouble, 0, ring_sequence_lengths(), false,
                     MobaGate::kToken, true});
    cases.push_back({layout_name + "_moba_token_f32", layout, true, at::kFloat, 0, ring_sequence_lengths(), false,
                     MobaGate::kToken, false});
  }
  if (cp == 4) {
    for (const auto& [layout_name, layout] : {layouts[1], layouts[2]}) {
      for (bool moba : {false, true}) {
        cases.push_back({layout_name + (moba ? "_moba" : "_dense") + "_f64_inner2", layout, moba, at::kDouble, 2});
      }
      cases.push_back({layout_name + "_vs_f64_inner2", layout, false, at::kDouble, 2, ring_sequence_lengths(), true});
      cases.push_back({layout_name + "_moba_token_dst_f64_inner2", layout, true, at::kDouble, 2,
                       ring_sequence_lengths(), false, MobaGate::kToken, true});
    }
  }
  // One 100-token sequence in stripes of 128: ranks 1.. hold no token at all and still
  // take part in the ring (empty shards travel, empty queries attend to nothing).
  for (bool moba : {false, true}) {
    cases.push_back({std::string("one_stripe") + (moba ? "_moba" : "_dense") + "_f64",
                     {CpLayoutKind::kStriped, 128}, moba, at::kDouble, 0, {100}});
  }
  cases.push_back({"one_stripe_vs_f64", {CpLayoutKind::kStriped, 128}, false, at::kDouble, 0, {100}, true});
  cases.push_back({"one_stripe_moba_token_dst_f64", {CpLayoutKind::kStriped, 128}, true, at::kDouble, 0, {100}, false,
                   MobaGate::kToken, true});
  return cases;
}

struct RingInputs {
  at::Tensor q, k, v, grad_out;  // the whole micro-batch, float64 values rounded to the case's dtype
  std::vector<int64_t> lengths;  // its sequences
};

inline RingInputs ring_inputs(at::ScalarType dtype, uint64_t seed,
                              const std::vector<int64_t>& lengths = ring_sequence_lengths()) {
  int64_t tokens = 0;
  for (int64_t n : lengths) tokens += n;
  at::manual_seed(seed);
  RingInputs in;
  in.lengths = lengths;
  in.q = at::randn({tokens, kRingQHeads, kRingHeadDim}, at::kDouble).to(dtype);
  in.k = at::randn({tokens, kRingKvHeads, kRingHeadDim}, at::kDouble).to(dtype);
  in.v = at::randn({tokens, kRingKvHeads, kRingHeadDim}, at::kDouble).to(dtype);
  in.grad_out = at::randn({tokens, kRingQHeads, kRingHeadDim}, at::kDouble).to(dtype);
  return in;
}

inline double ring_scale() { return 1.0 / std::sqrt(static_cast<double>(kRingHeadDim)); }

inline MobaParams ring_moba_params() {
  MobaParams params;
  params.block_size = kRingBlock;
  params.top_k = {3};
  params.scale = ring_scale();
  return params;
}

// DST's request for a MoBA case of `sequences` sequences: budgets 3, 2, 4, 1, ... and a
// floor at 0.9 of C(4), the curve up to k 6.
inline AttentionBudgetRequest ring_moba_dst_request(size_t sequences) {
  AttentionBudgetRequest request;
  for (size_t s = 0; s < sequences; ++s) request.top_k.push_back(std::vector<int64_t>{3, 2, 4, 1}[s % 4]);
  request.coverage_floor_ratio = 0.9;
  request.coverage_reference_k = 4;
  request.coverage_curve_up_to = 6;
  return request;
}

// The request a case's ring runs under (none but for DST cases).
inline AttentionBudgetRequest ring_request(const RingCase& c) {
  return c.dst ? ring_moba_dst_request(c.lengths.size()) : AttentionBudgetRequest{};
}

// The one-rank MoBA parameters of a case: its gate, and its request's budgets and floor.
inline MobaParams ring_moba_params(const RingCase& c) {
  MobaParams params = ring_moba_params();
  params.gate = c.gate;
  if (c.dst) {
    const AttentionBudgetRequest request = ring_request(c);
    params.top_k = request.top_k;
    params.coverage_floor_ratio = request.coverage_floor_ratio;
    params.coverage_reference_k = request.coverage_reference_k;
    params.coverage_curve_up_to = request.coverage_curve_up_to;
  }
  return params;
}

// Vertical-slash in the ring's blocks: 4 columns besides 3 sinks and 3 offsets besides a
// 4-offset window, from the last 8 queries: far slashes add key blocks, and most columns
// fall outside them.
inline VerticalSlashParams ring_vertical_slash_params() {
  VerticalSlashParams params;
  params.budget = VerticalSlashBudget::kTopK;
  params.vertical_count = 4;
  params.slash_count = 3;
  params.sink_tokens = 3;
  params.local_window = 4;
  params.last_queries = 8;
  params.block_size = kRingBlock;
  return params;
}

// DST's request for the model test's batch (its 4 sequences): kept keys per query per
// sequence (0: the pattern's own rule) and a coverage floor.
inline AttentionBudgetRequest ring_vertical_slash_dst_request() {
  AttentionBudgetRequest request;
  request.top_k = {12, 8, 0, 4};
  request.coverage_floor_ratio = 0.8;
  return request;
}

// The case's pattern under CP: dense, MoBA (ring_moba_params' block and k) or
// vertical-slash (ring_vertical_slash_params), in blocks of kRingBlock.
inline std::shared_ptr<RingPatternSelector> ring_selector(const RingCase& c) {
  if (c.vertical_slash) return std::make_shared<VerticalSlashRingSelector>(ring_vertical_slash_params());
  if (c.moba) return std::make_shared<MobaRingSelector>(kRingBlock, ring_moba_params().top_k.front(), c.gate);
  return std::make_shared<DenseRingSelector>(kRingBlock);
}

// The index the vertical-slash selector's last call built.
inline const std::vector<std::vector<VerticalSlashHeadIndex>>& ring_last_index(const RingPatternSelector& selector) {
  return dynamic_cast<const VerticalSlashRingSelector&>(selector).last_index();
}

// The one-rank vertical-slash index of the whole micro-batch.
inline std::vector<std::vector<VerticalSlashHeadIndex>> ring_vertical_slash_index_oracle(const RingInputs& in) {
  return vertical_slash_index(in.q, in.k, PackedSequences::from_lengths(in.lengths), ring_vertical_slash_params(),
                              ring_scale());
}

struct RingOracle {
  at::Tensor out, lse, dq, dk, dv;  // float64, the whole micro-batch
};

// One rank, float64: dense causal attention written out with a [Hq, T, T] mask, or
// MoBA's float64 reference (moba_reference.h) with `params`; gradients of sum(out * grad_out).
inline RingOracle ring_oracle(const RingInputs& in, bool moba, const MobaParams& params, double scale) {
  const PackedSequences sequences = PackedSequences::from_lengths(in.lengths);
  at::Tensor q = in.q.detach().to(at::kDouble).clone().requires_grad_(true);
  at::Tensor k = in.k.detach().to(at::kDouble).clone().requires_grad_(true);
  at::Tensor v = in.v.detach().to(at::kDouble).clone().requires_grad_(true);
  RingOracle oracle;
  if (moba) {
    const MobaReferenceResult r = moba_reference(q, k, v, sequences, sequences, params);
    oracle.out = r.out;
    oracle.lse = r.lse;
  } else {
    const int64_t tokens = q.size(0);
    std::vector<int64_t> sequence_of(tokens);
    for (int64_t s = 0; s < sequences.num_sequences(); ++s) {
      for (int64_t t = sequences.offsets[s]; t < sequences.offsets[s + 1]; ++t) sequence_of[t] = s;
    }
    const at::Tensor seq = at::tensor(sequence_of, at::kLong);
    const at::Tensor index = at::arange(tokens, at::kLong);
    const at::Tensor allowed = seq.unsqueeze(1).eq(seq.unsqueeze(0)).logical_and(index.unsqueeze(1) >= index.unsqueeze(0));
    const int64_t group = q.size(1) / k.size(1);
    const at::Tensor kk = k.repeat_interleave(group, 1).permute({1, 2, 0});  // [Hq, D, T]
    const at::Tensor vv = v.repeat_interleave(group, 1).permute({1, 0, 2});  // [Hq, T, D]
    const at::Tensor scores =
        at::matmul(q.permute({1, 0, 2}), kk).mul(scale).masked_fill(allowed.logical_not(), -INFINITY);
    oracle.lse = at::logsumexp(scores, -1).transpose(0, 1);  // [T, Hq]
    oracle.out = at::matmul(at::softmax(scores, -1), vv).permute({1, 0, 2});
  }
  (oracle.out * in.grad_out.to(at::kDouble)).sum().backward();
  oracle.out = oracle.out.detach();
  oracle.lse = oracle.lse.detach();
  oracle.dq = q.grad();
  oracle.dk = k.grad();
  oracle.dv = v.grad();
  return oracle;
}

inline RingOracle ring_oracle(const RingInputs& in, bool moba) {
  return ring_oracle(in, moba, ring_moba_params(), ring_scale());
}

// A vertical-slash index as two tensors to compare across processes: its lists flattened
// (per sequence and head: the count of verticals, the verticals, the count of slashes,
// the slashes) and the coverage per (sequence, head).
inline std::pair<at::Tensor, at::Tensor> ring_index_tensors(const std::vector<std::vector<VerticalSlashHeadIndex>>& index) {
  std::vector<int64_t> lists;
  std::vector<double> coverage;
  for (const auto& heads : index) {
    for (const VerticalSlashHeadIndex& head : heads) {
      lists.push_back(static_cast<int64_t>(head.verticals.size()));
      lists.insert(lists.end(), head.verticals.begin(), head.verticals.end());
      lists.push_back(static_cast<int64_t>(head.slashes.size()));
      lists.insert(lists.end(), head.slashes.begin(), head.slashes.end());
      coverage.push_back(head.coverage);
    }
  }
  return {at::tensor(lists, at::kLong), at::tensor(coverage, at::kDouble)};
}

// Vertical-slash's float64 reference with `index`; gradients of sum(out * grad_out).
inline RingOracle ring_vertical_slash_oracle(const RingInputs& in,
                                             const std::vector<std::vector<VerticalSlashHeadIndex>>& index,
                                             double scale) {
  at::Tensor q = in.q.detach().to(at::kDouble).clone().requires_grad_(true);
  at::Tensor k = in.k.detach().to(at::kDouble).clone().requires_grad_(true);
  at::Tensor v = in.v.detach().to(at::kDouble).clone().requires_grad_(true);
  const VerticalSlashReferenceResult r =
      vertical_slash_reference(q, k, v, PackedSequences::from_lengths(in.lengths), index, scale);
  (r.out * in.grad_out.to(at::kDouble)).sum().backward();
  return {r.out.detach(), r.lse.detach(), q.grad(), k.grad(), v.grad()};
}

// The case's oracle: vertical-slash's float64 reference on the one-rank index, or the above.
inline RingOracle ring_oracle(const RingInputs& in, const RingCase& c) {
  if (!c.vertical_slash) return ring_oracle(in, c.moba, ring_moba_params(c), ring_scale());
  return ring_vertical_slash_oracle(in, ring_vertical_slash_index_oracle(in), ring_scale());
}

inline double ring_tolerance(at::ScalarType dtype) { return dtype == at::kDouble ? 1e-10 : 1e-5; }

}  // namespace sb::test
