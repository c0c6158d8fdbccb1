#include "kernels/attention/patterns/moba/moba_reference.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <limits>

namespace sb {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The gate of one sequence, all in float64. Its rows are what one choice holds for: the
// query blocks (block gate) or the queries (token gate).
struct SequenceGate {
  int64_t first_block = 0, blocks = 0;
  int64_t key_offset = 0, keys = 0, query_offset = 0, queries = 0;
  at::Tensor pi;            // [Hq, R, nb] softmax of the gate scores over the eligible blocks
  at::Tensor rank;          // [Hq, R, nb] position of j among the row's candidates, best first
  at::Tensor candidate;     // [R, nb] eligible and not the row's own block
  at::Tensor own;           // [R, nb] the row's own block
  at::Tensor has_query;     // [R] bool
  at::Tensor row_of_query;  // [queries] int64
};

SequenceGate reference_gate(const at::Tensor& q, const at::Tensor& k, const at::Tensor& kv_of_head,
                            int64_t key_offset, int64_t keys, int64_t query_offset,
                            int64_t queries, const MobaParams& params) {
  SequenceGate gate;
  gate.key_offset = key_offset;
  gate.keys = keys;
  gate.query_offset = query_offset;
  gate.queries = queries;
  const int64_t block = params.block_size;
  const int64_t nb = (keys + block - 1) / block;
  gate.blocks = nb;
  if (nb == 0) return gate;
  const int64_t q_heads = q.size(1), dim = q.size(2);
  const int64_t first_query_pos = keys - queries;
  const at::Tensor query_block = at::arange(first_query_pos, keys, at::kLong).div(block, "floor");  // [n]

  std::vector<at::Tensor> key_means;
  for (int64_t j = 0; j < nb; ++j) {
    const int64_t begin = j * block, end = std::min(keys, begin + block);
    key_means.push_back(k.narrow(0, key_offset + begin, end - begin).mean(0));  // [Hkv, D]
  }
  const at::Tensor kbar = at::stack(key_means).index_select(1, kv_of_head);  // [nb, Hq, D]
  at::Tensor row_queries, row_block;  // [R, Hq, D], [R]
  if (params.gate == MobaGate::kToken) {
    row_queries = q.narrow(0, query_offset, queries);
    row_block = query_block;
    gate.has_query = at::ones({queries}, at::kBool);
    gate.row_of_query = at::arange(queries, at::kLong);
  } else {
    row_queries = at::zeros({nb, q_heads, dim}, at::kDouble);
    gate.has_query = at::zeros({nb}, at::kBool);
    for (int64_t j = 0; j < nb; ++j) {
      const int64_t begin = j * block, end = std::min(keys, begin + block);
      const int64_t query_begin = std::max(begin, first_query_pos);
      if (query_begin < end) {
        row_queries[j] = q.narrow(0, query_offset + query_begin - first_query_pos, end - query_begin).mean(0);
        gate.has_query[j] = true;
      }
    }
    row_block = at::arange(nb, at::kLong);
    gate.row_of_query = query_block;
  }
  const at::Tensor scores = at::einsum("ihd,jhd->hij", {row_queries, kbar});  // [Hq, R, nb]
  const at::Tensor block_ids = at::arange(nb, at::kLong).unsqueeze(0);
  gate.own = block_ids.eq(row_block.unsqueeze(1));                                 // [R, nb]
  const at::Tensor eligible = params.causal ? block_ids.le(row_block.unsqueeze(1)) : at::ones_like(gate.own);
  gate.pi = at::softmax(scores.masked_fill(eligible.logical_not(), -kInf), -1);
  gate.candidate = eligible.logical_and(gate.own.logical_not());
  // A stable descending sort keeps equal scores in index order: the lower block wins.
  const at::Tensor order = std::get<1>(at::sort(
      scores.masked_fill(gate.candidate.logical_not(), -kInf), /*stable=*/true, -1, true));
  gate.rank = at::empty_like(order).scatter_(
      -1, order, at::arange(nb, order.options()).expand_as(order).contiguous());
  return gate;
}

// [Hq, R, nb] bool: the blocks chosen with budget k.
at::Tensor reference_selection(const SequenceGate& gate, int64_t k) {
  return gate.own.logical_or(gate.candidate.logical_and(gate.rank.lt(k - 1)));
}

// Sum over heads and rows of the selected probability mass, and the row count.
std::pair<double, int64_t> reference_coverage_sum(const SequenceGate& gate,
                                                  const at::Tensor& selection) {
  if (gate.blocks == 0 || gate.queries == 0) return {0.0, 0};
  const at::Tensor per_row = (gate.pi * selection.to(at::kDouble)).sum(-1);  // [Hq, R]
  const at::Tensor rows = gate.has_query.to(at::kDouble).unsqueeze(0).expand_as(per_row);
  return {(per_row * rows).sum().item<double>(), rows.sum().item<int64_t>()};
}

}  // namespace

MobaReferenceResult moba_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const PackedSequences& query_sequences,
                                   const PackedSequences& key_sequences, const MobaParams& params,
                                   int64_t row_begin, int64_t row_end) {
  TORCH_CHECK(params.block_size >= 1, "moba_reference: block_size must be >= 1");
  const at::Tensor qd = q.to(at::kDouble), kd = k.to(at::kDouble), vd = v.to(at::kDouble);
  const int64_t q_heads = q.size(1), group = q_heads / k.size(1);
  const int64_t sequences = key_sequences.num_sequences();
  const std::vector<int64_t> budgets = moba_budgets_per_sequence(params, sequences);
  if (row_end < 0) row_end = q.size(0);
  const at::Tensor kv_of_head = at::arange(q_heads, at::kLong).div(group, "floor");

  std::vector<SequenceGate> gates;
  int64_t total_blocks = 0, most_eligible = 0;
  {
    const c10::NoGradGuard no_grad;
    for (int64_t s = 0; s < sequences; ++s) {
      gates.push_back(reference_gate(qd.detach(), kd.detach(), kv_of_head, key_sequences.offsets[s],
                                     key_sequences.length(s), query_sequences.offsets[s],
                                     query_sequences.length(s), params));
      SequenceGate& gate = gates.back();
      gate.first_block = total_blocks;
      total_blocks += gate.blocks;
      if (gate.queries > 0) {
        // Causal: the last block (which holds queries) has them all eligible.
        most_eligible = std::max(most_eligible, gate.blocks);
      }
    }
  }

  MobaReferenceResult result;
  if (params.coverage_floor_ratio > 0.0 && most_eligible > 0) {
    const int64_t up_to = std::min(params.coverage_reference_k, most_eligible);
    std::vector<double> call(up_to + 1, 0.0);
    for (int64_t kk = 1; kk <= up_to; ++kk) {
      double sum = 0.0;
      int64_t rows = 0;
      for (const SequenceGate& gate : gates) {
        if (gate.blocks == 0) continue;
        const auto [s, n] = reference_coverage_sum(gate, reference_selection(gate, kk));
        sum += s;
        rows += n;
      }
      call[kk] = sum / static_cast<double>(rows);
    }
    result.k_floor = up_to;
    for (int64_t kk = up_to; kk >= 1; --kk) {
      if (call[kk] >= params.coverage_floor_ratio * call[up_to]) result.k_floor = kk;
    }
  } else if (params.coverage_floor_ratio > 0.0) {
    result.k_floor = 1;
  }

  const bool by_token = params.gate == MobaGate::kToken;
  if (by_token) {
    result.token_selected = at::zeros({q_heads, q.size(0), total_blocks}, at::kBool);
  } else {
    result.block_selected = at::zeros({q_heads, total_blocks, total_blocks}, at::kBool);
  }
  std::vector<at::Tensor> outs, lses;
  double call_sum = 0.0;
  int64_t call_rows = 0;
  for (int64_t s = 0; s < sequences; ++s) {
    const SequenceGate& gate = gates[s];
    const int64_t budget = std::max(budgets[s], result.k_floor);
    result.top_k.push_back(budget);
    if (gate.blocks == 0 || gate.queries == 0) {
      result.coverage.push_back(1.0);
      continue;
    }
    const at::Tensor selection = reference_selection(gate, budget);  // [Hq, nb, nb]
    const auto [sum, rows] = reference_coverage_sum(gate, selection);
    result.coverage.push_back(sum / static_cast<double>(rows));
    call_sum += sum;
    call_rows += rows;
    if (by_token) {
      result.token_selected.narrow(1, gate.query_offset, gate.queries)
          .narrow(2, gate.first_block, gate.blocks)
          .copy_(selection);
    } else {
      result.block_selected.narrow(1, gate.first_block, gate.blocks)
          .narrow(2, gate.first_block, gate.blocks)
          .copy_(selection.logical_and(gate.has_query.view({1, -1, 1})));
    }

    // Attention for the requested query rows of this sequence.
    const int64_t i0 = std::max<int64_t>(row_begin - gate.query_offset, 0);
    const int64_t i1 = std::min<int64_t>(row_end - gate.query_offset, gate.queries);
    if (i0 >= i1) continue;
    const int64_t first_query_pos = gate.keys - gate.queries;
    const at::Tensor query_pos = at::arange(first_query_pos + i0, first_query_pos + i1, at::kLong);
    const at::Tensor key_pos = at::arange(gate.keys, at::kLong);
    const at::Tensor allowed =
        selection.index_select(1, gate.row_of_query.narrow(0, i0, i1 - i0))
            .index_select(2, key_pos.div(params.block_size, "floor"))
            .logical_and(params.causal ? key_pos.unsqueeze(0).le(query_pos.unsqueeze(1))
                                       : at::ones({i1 - i0, gate.keys}, at::kBool));  // [Hq, r, L]
    const at::Tensor qs = qd.narrow(0, gate.query_offset + i0, i1 - i0);           // [r, Hq, D]
    const at::Tensor ks = kd.narrow(0, gate.key_offset, gate.keys).index_select(1, kv_of_head);
    const at::Tensor vs = vd.narrow(0, gate.key_offset, gate.keys).index_select(1, kv_of_head);
    const at::Tensor scores = (at::einsum("ihd,thd->hit", {qs, ks}) * params.scale)
                                  .masked_fill(allowed.logical_not(), -kInf);  // [Hq, r, L]
    lses.push_back(at::logsumexp(scores, {-1}).t());                           // [r, Hq]
    outs.push_back(at::einsum("hit,thd->ihd", {at::softmax(scores, -1), vs}));  // [r, Hq, D]
  }
  result.coverage_mean = call_rows > 0 ? call_sum / static_cast<double>(call_rows) : 1.0;
  result.out = outs.empty() ? at::zeros({0, q_heads, q.size(2)}, at::kDouble) : at::cat(outs, 0);
  result.lse = lses.empty() ? at::zeros({0, q_heads}, at::kDouble) : at::cat(lses, 0);
  return result;
}

}  // namespace sb
