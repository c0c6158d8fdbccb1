#pragma once
// Shared by the MoBA tests: random packed inputs, a forward + backward through the
// implementation under test or the float64 oracle (moba_reference), and conversions.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/patterns/moba/moba_key_blocks.h"
#include "kernels/attention/patterns/moba/moba_reference.h"

namespace sb::test {

struct MobaInputs {
  at::Tensor q, k, v, grad_out;  // q, grad_out [Tq, Hq, D]; k, v [Tk, Hkv, D]
};

// Standard normal inputs drawn in float64 and rounded to dtype (the oracle sees the
// rounded values). Tq = sum(query_lengths), Tk = sum(key_lengths).
inline MobaInputs moba_random_inputs(const std::vector<int64_t>& query_lengths,
                                     const std::vector<int64_t>& key_lengths, int64_t q_heads,
                                     int64_t kv_heads, int64_t head_dim, at::ScalarType dtype,
                                     uint64_t seed) {
  int64_t tq = 0, tk = 0;
  for (int64_t n : query_lengths) tq += n;
  for (int64_t n : key_lengths) tk += n;
  at::manual_seed(seed);
  MobaInputs in;
  in.q = at::randn({tq, q_heads, head_dim}, at::kDouble).to(dtype);
  in.k = at::randn({tk, kv_heads, head_dim}, at::kDouble).to(dtype);
  in.v = at::randn({tk, kv_heads, head_dim}, at::kDouble).to(dtype);
  in.grad_out = at::randn({tq, q_heads, head_dim}, at::kDouble).to(dtype);
  return in;
}

struct MobaGrads {
  at::Tensor out, dq, dk, dv;
};

// Forward and backward of sum(out * grad_out): the implementation (use_reference =
// false) in the inputs' dtype, or the oracle in float64.
inline MobaGrads moba_run_with_grads(const MobaInputs& in, const PackedSequences& queries,
                                     const PackedSequences& keys, const MobaParams& params,
                                     bool use_reference) {
  const at::ScalarType dtype = use_reference ? at::kDouble : in.q.scalar_type();
  at::Tensor q = in.q.detach().to(dtype).requires_grad_(true);
  at::Tensor k = in.k.detach().to(dtype).requires_grad_(true);
  at::Tensor v = in.v.detach().to(dtype).requires_grad_(true);
  const at::Tensor out = use_reference ? moba_reference(q, k, v, queries, keys, params).out
                                       : moba_attention_packed(q, k, v, queries, keys, params).out;
  (out * in.grad_out.to(dtype)).sum().backward();
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

// On the host, so that a device result compares with a CPU one.
inline double moba_max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0 && b.numel() == 0) return 0.0;
  return (a.cpu().to(at::kDouble) - b.cpu().to(at::kDouble)).abs().max().item<double>();
}

// Causal MoBA parameters.
inline MobaParams moba_test_params(int64_t block_size, std::vector<int64_t> top_k, double scale,
                                   MobaGate gate = MobaGate::kBlock) {
  MobaParams params;
  params.block_size = block_size;
  params.gate = gate;
  params.top_k = std::move(top_k);
  params.scale = scale;
  return params;
}

// Output and every gradient within tolerance of the oracle's.
inline void expect_moba_grads_near(const MobaGrads& actual, const MobaGrads& expected,
                                   double tolerance) {
  EXPECT_LT(moba_max_abs_diff(actual.out, expected.out), tolerance) << "forward";
  EXPECT_LT(moba_max_abs_diff(actual.dq, expected.dq), tolerance) << "dq";
  EXPECT_LT(moba_max_abs_diff(actual.dk, expected.dk), tolerance) << "dk";
  EXPECT_LT(moba_max_abs_diff(actual.dv, expected.dv), tolerance) << "dv";
}

// selected [Hq, R, kcap] (-1 padded block ids) -> [Hq, R, NB] bool, as the oracle reports
// it (R = NB under the block gate, the default here; R = Tq under the token gate).
inline at::Tensor moba_selected_mask(const at::Tensor& selected, int64_t blocks = -1) {
  const int64_t heads = selected.size(0), rows = selected.size(1);
  if (blocks < 0) blocks = rows;
  at::Tensor mask = at::zeros({heads, rows, blocks + 1}, at::kBool);  // last column: padding
  const at::Tensor ids = selected.to(at::kLong).cpu();
  mask.scatter_(2, ids.where(ids.ge(0), at::full_like(ids, blocks)), true);
  return mask.narrow(2, 0, blocks);
}

// Key blocks no routing makes in the attention tests: 300 entries copy the partial last
// block (keys 32..39, 8 of a block of 16) of head 1, more than one thread block of the
// CUDA gradient sum stages at a time; 5 copy the full block 0 of head 0; empty slots
// between them. For keys of 40 tokens and 2 heads.
inline MobaKeyBlocks many_copies_of_one_block() {
  std::vector<int64_t> fields;
  int64_t target = 0;
  const auto add = [&](int64_t source, int64_t tokens, int64_t head) {
    fields.insert(fields.end(), {source, tokens, tokens > 0 ? target : 0, head});
    target += tokens;
  };
  for (int64_t e = 0; e < 300; ++e) {
    add(32, 8, 1);
    if (e % 60 == 0) add(0, 16, 0);
    if (e % 7 == 0) add(0, 0, 0);
  }
  MobaKeyBlocks blocks;
  blocks.entries = at::tensor(fields, at::kLong).view({-1, kKeyBlockFields});
  blocks.gathered_rows = target;
  blocks.max_tokens = 16;
  blocks.source_tokens = 40;
  blocks.source_heads = 2;
  return blocks;
}

// Rows of k.view(Tk * Hkv, D) that the entries gather, in gathered order (the per-row
// index the key blocks replace): the oracle of gather_key_blocks and add_key_block_grads.
inline at::Tensor key_rows_of(const MobaKeyBlocks& keys) {
  std::vector<int64_t> rows(static_cast<size_t>(keys.gathered_rows), -1);
  const at::Tensor entries = keys.entries.cpu();
  for (int64_t e = 0; e < entries.size(0); ++e) {
    const int64_t* f = entries.const_data_ptr<int64_t>() + e * kKeyBlockFields;
    for (int64_t t = 0; t < f[kKeyBlockTokens]; ++t) {
      const int64_t target = f[kKeyBlockTarget] + t;
      // Entries that overlap or leave the gathered rows are the bugs this oracle is for.
      TORCH_CHECK(target >= 0 && target < keys.gathered_rows, "entry ", e, " writes gathered row ", target,
                  " of ", keys.gathered_rows);
      TORCH_CHECK(rows[static_cast<size_t>(target)] == -1, "gathered row ", target, " written twice (entry ", e,
                  ")");
      rows[static_cast<size_t>(target)] = (f[kKeyBlockSource] + t) * keys.source_heads + f[kKeyBlockHead];
    }
  }
  return at::tensor(rows, at::kLong);
}

// One routing row (head, query block or query token) of selected [Hq, R, kcap]: its
// blocks without the -1 padding.
inline std::vector<int64_t> moba_row_blocks(const MobaRouting& routing, int64_t head, int64_t row) {
  std::vector<int64_t> ids;
  const at::Tensor selected = routing.selected[head][row].to(at::kLong).cpu();
  for (int64_t i = 0; i < selected.size(0); ++i) {
    if (selected[i].item<int64_t>() >= 0) ids.push_back(selected[i].item<int64_t>());
  }
  return ids;
}

// What the oracle reports as selected under params.gate, as a mask of the routing's shape.
inline void expect_selection_is_the_oracles(const MobaRouting& routing, const MobaReferenceResult& reference,
                                            const MobaParams& params) {
  if (params.gate == MobaGate::kToken) {
    EXPECT_TRUE(at::equal(moba_selected_mask(routing.selected, reference.token_selected.size(2)),
                          reference.token_selected));
  } else {
    EXPECT_TRUE(at::equal(moba_selected_mask(routing.selected), reference.block_selected));
  }
}

inline std::string moba_gate_name(MobaGate gate) { return moba_gate_options().name_of(gate); }

}  // namespace sb::test
