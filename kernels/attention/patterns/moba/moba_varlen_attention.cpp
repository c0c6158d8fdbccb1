#include "kernels/attention/patterns/moba/moba_varlen_attention.h"

#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <limits>

#ifdef SB_WITH_CUDA
#include "kernels/attention/patterns/moba/cuda/moba_varlen_index_cuda.h"
#endif

namespace sb {
namespace {

// Keys of the selected blocks other than the diagonal, per row: int64 [Hq * NB] (host).
std::vector<int64_t> other_keys_per_row(const BlockLayout& layout, const MobaRouting& routing) {
  const int64_t blocks = layout.num_blocks();
  std::vector<int64_t> lengths(blocks + 1, 0);  // index NB: the -1 padding
  for (int64_t b = 0; b < blocks; ++b) lengths[b] = layout.blocks[b].key_len;
  const at::Tensor key_len = at::tensor(lengths, at::kLong).to(routing.selected.device());
  const at::Tensor ids = routing.selected.to(at::kLong);  // [Hq, NB, kcap]
  const at::Tensor padded = ids.where(ids.ge(0), at::full_like(ids, blocks));
  const at::Tensor selected_keys = key_len.index_select(0, padded.flatten()).view(ids.sizes()).sum(-1);
  const at::Tensor diagonal =
      key_len.narrow(0, 0, blocks).unsqueeze(0) * routing.selected_count.gt(0).to(at::kLong);
  const at::Tensor other = (selected_keys - diagonal).flatten().cpu().contiguous();
  return std::vector<int64_t>(other.const_data_ptr<int64_t>(),
                              other.const_data_ptr<int64_t>() + other.numel());
}

// What the autograd context keeps besides tensors.
struct MobaVarlenState : torch::CustomClassHolder {
  MobaVarlenPlan plan;
  const VarlenAttentionOps* ops = nullptr;
  VarlenAttentionForward self_forward;
  std::vector<VarlenAttentionForward> chunk_forwards;
};

// [Nk, H, D] keys of part 1: k itself, or the diagonal blocks gathered.
at::Tensor self_keys(const at::Tensor& k, const MobaVarlenPlan& plan) {
  return plan.self_kv_index.defined() ? k.index_select(0, plan.self_kv_index) : k;
}

// Rows of x [T, H, D] viewed as [T * H, D], gathered: [n, 1, D].
at::Tensor gather_rows(const at::Tensor& x, const at::Tensor& index) {
  return x.reshape({-1, x.size(-1)}).index_select(0, index).unsqueeze(1);
}

class MobaVarlenFunction : public torch::autograd::Function<MobaVarlenFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const at::Tensor& q, const at::Tensor& k,
                                                const at::Tensor& v, const MobaVarlenPlan* plan,
                                                const VarlenAttentionOps* ops) {
    auto state = c10::make_intrusive<MobaVarlenState>();
    state->plan = *plan;
    state->ops = ops;
    const int64_t tq = q.size(0), q_heads = q.size(1), dim = q.size(2);
    const at::ScalarType acc = at::toOpMathType(q.scalar_type());

    // Part 1: the diagonal blocks.
    state->self_forward = ops->forward(q, self_keys(k, *plan), self_keys(v, *plan), plan->self_cu_q,
                                       plan->self_cu_k, plan->self_max_q, plan->self_max_k,
                                       plan->causal, plan->scale);
    // Copies: merged in place below. Indexed by query * Hq + head.
    at::Tensor out = state->self_forward.out.to(acc, false, /*copy=*/true).view({tq * q_heads, dim});
    at::Tensor lse = state->self_forward.lse.to(acc, false, true).t().contiguous().view({tq * q_heads});
    state->self_forward.out = at::Tensor();  // only the random state is needed later
    state->self_forward.lse = at::Tensor();

    // Part 2: the other selected blocks. A block plan merges row by row by log-sum-exp
    // (rows of different chunks are disjoint, so each (query, head) is merged exactly
    // once); a token plan keeps each partial result in its slot and merges them all after.
    const int64_t slots = plan->slots;
    at::Tensor slot_out, slot_lse;  // [Tq * Hq * slots, D], [Tq * Hq * slots]
    if (slots > 0) {
      slot_out = at::zeros({tq * q_heads * slots, dim}, out.options());
      slot_lse = at::full({tq * q_heads * slots}, -std::numeric_limits<double>::infinity(), lse.options());
    }
    for (const MobaVarlenChunk& chunk : plan->chunks) {
      const at::Tensor q_g = gather_rows(q, chunk.q_index);   // [nq, 1, D]
      const at::Tensor k_g = gather_key_blocks(k, chunk.key_blocks);  // [nk, 1, D]
      const at::Tensor v_g = gather_key_blocks(v, chunk.key_blocks);  // [nk, 1, D]
      VarlenAttentionForward part = ops->forward(q_g, k_g, v_g, chunk.cu_q, chunk.cu_k, chunk.max_q,
                                                 chunk.max_k, /*causal=*/false, plan->scale);
      if (slots > 0) {
        slot_out.index_copy_(0, chunk.slot_index, part.out.to(acc).view({-1, dim}));
        slot_lse.index_copy_(0, chunk.slot_index, part.lse.to(acc).view({-1}));
        part.out = at::Tensor();
        state->chunk_forwards.push_back(std::move(part));
        continue;
      }
      const at::Tensor lse_self = lse.index_select(0, chunk.q_index);  // [nq]
      const at::Tensor lse_part = part.lse.to(acc).view({-1});         // [nq]
      const at::Tensor lse_merged = at::logaddexp(lse_self, lse_part);
      const at::Tensor merged =
          out.index_select(0, chunk.q_index) * (lse_self - lse_merged).exp().unsqueeze(1) +
          part.out.to(acc).view({-1, dim}) * (lse_part - lse_merged).exp().unsqueeze(1);
      out.index_copy_(0, chunk.q_index, merged);
      lse.index_copy_(0, chunk.q_index, lse_merged);
      part.out = at::Tensor();  // only the random state is needed later
      state->chunk_forwards.push_back(std::move(part));
    }
    if (slots > 0) {
      const at::Tensor parts = at::cat({lse.unsqueeze(1), slot_lse.view({-1, slots})}, 1);  // [Tq*Hq, 1 + slots]
      const at::Tensor merged = at::logsumexp(parts, {1});  // the diagonal part is never empty
      const at::Tensor weights = (parts - merged.unsqueeze(1)).exp();
      out = out * weights.narrow(1, 0, 1) +
            (slot_out.view({-1, slots, dim}) * weights.narrow(1, 1, slots).unsqueeze(2)).sum(1);
      lse = merged;
    }
    const at::Tensor result = out.view({tq, q_heads, dim}).to(q.scalar_type());
    const at::Tensor result_lse = lse.view({tq, q_heads});
    ctx->save_for_backward({q, k, v, result, result_lse});
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    ctx->mark_non_differentiable({result_lse});
    return {result, result_lse};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    const auto state =
        c10::static_intrusive_pointer_cast<MobaVarlenState>(ctx->saved_data["state"].toCapsule());
    const MobaVarlenPlan& plan = state->plan;
    const VarlenAttentionOps& ops = *state->ops;
    const at::ScalarType acc = at::toOpMathType(q.scalar_type());
    const int64_t dim = q.size(2);
    if (!grads[0].defined()) {
      return {at::zeros_like(q), at::zeros_like(k), at::zeros_like(v), at::Tensor(), at::Tensor()};
    }
    const at::Tensor grad_out = grads[0].contiguous();

    // Both parts use the merged output and log-sum-exp (see the header).
    const at::Tensor lse_by_head = lse.t().contiguous();  // [Hq, Tq]
    auto [dq_self, dk_self, dv_self] =
        ops.backward(grad_out, q, self_keys(k, plan), self_keys(v, plan), out, lse_by_head,
                     plan.self_cu_q, plan.self_cu_k, plan.self_max_q, plan.self_max_k, plan.causal,
                     plan.scale, state->self_forward);
    at::Tensor dq = dq_self.to(acc).reshape({-1, dim}).clone();  // [Tq*Hq, D]
    at::Tensor dk, dv;
    if (plan.self_kv_index.defined()) {
      dk = at::zeros(k.sizes(), k.options().dtype(acc));
      dv = at::zeros(v.sizes(), v.options().dtype(acc));
      dk.index_add_(0, plan.self_kv_index, dk_self.to(acc));
      dv.index_add_(0, plan.self_kv_index, dv_self.to(acc));
    } else {
      dk = dk_self.to(acc).clone(at::MemoryFormat::Contiguous);
      dv = dv_self.to(acc).clone(at::MemoryFormat::Contiguous);
    }
    const at::Tensor lse_rows = lse.reshape({-1});
    at::Tensor dq_slots;  // token plans: [Tq * Hq * slots, D], summed in slot order at the end
    if (plan.slots > 0) dq_slots = at::zeros({dq.size(0) * plan.slots, dim}, dq.options());
    for (size_t c = 0; c < plan.chunks.size(); ++c) {
      const MobaVarlenChunk& chunk = plan.chunks[c];
      auto [dq_g, dk_g, dv_g] =
          ops.backward(gather_rows(grad_out, chunk.q_index), gather_rows(q, chunk.q_index),
                       gather_key_blocks(k, chunk.key_blocks), gather_key_blocks(v, chunk.key_blocks),
                       gather_rows(out, chunk.q_index),
                       lse_rows.index_select(0, chunk.q_index).unsqueeze(0).contiguous(),
                       chunk.cu_q, chunk.cu_k, chunk.max_q, chunk.max_k, /*causal=*/false,
                       plan.scale, state->chunk_forwards[c]);
      if (plan.slots > 0) {
        dq_slots.index_copy_(0, chunk.slot_index, dq_g.to(acc).view({-1, dim}));
      } else {
        // Each (query, head) is in one row of one chunk: no two sources share a dq row.
        dq.index_add_(0, chunk.q_index, dq_g.to(acc).view({-1, dim}));
      }
      const MobaKeyBlockRuns runs = moba_key_block_runs(chunk.key_blocks);
      add_key_block_grads(dk, dk_g, chunk.key_blocks, runs);
      add_key_block_grads(dv, dv_g, chunk.key_blocks, runs);
    }
    if (plan.slots > 0) dq += dq_slots.view({-1, plan.slots, dim}).sum(1);
    return {dq.view(q.sizes()).to(q.scalar_type()), dk.to(k.scalar_type()),
            dv.to(v.scalar_type()), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor moba_index_tensor(const std::vector<int64_t>& values, at::ScalarType dtype,
                             const at::Device& device) {
  if (dtype == at::kInt) {
    TORCH_CHECK(values.empty() || values.back() <= std::numeric_limits<int32_t>::max(),
                "MoBA varlen: ", values.back(), " rows exceed the int32 offsets of the varlen op");
  }
  return at::tensor(values, at::kLong).to(dtype).to(device);
}

void moba_build_varlen_indices(const at::Tensor& selected, const at::Tensor& table,
                               const std::vector<int64_t>& rows, const std::vector<int64_t>& cu_q,
                               const std::vector<int64_t>& cu_k, int64_t q_heads,
                               int64_t kv_heads, int64_t total_keys, int64_t block_size,
                               MobaVarlenChunk& chunk) {
  const int64_t blocks = selected.size(1), capacity = selected.size(2);
  const auto index_options = at::TensorOptions().dtype(at::kLong).device(selected.device());
  chunk.q_index = at::empty({cu_q.back()}, index_options);
  MobaKeyBlocks& keys = chunk.key_blocks;
  keys.entries = at::zeros({static_cast<int64_t>(rows.size()) * capacity, kKeyBlockFields},
                           index_options);
  keys.gathered_rows = cu_k.back();
  keys.max_tokens = block_size;
  keys.source_tokens = total_keys;
  keys.source_heads = kv_heads;
#ifdef SB_WITH_CUDA
  if (selected.is_cuda()) {
    moba_build_varlen_indices_cuda(selected, table, moba_index_tensor(rows, at::kLong, selected.device()),
                                   moba_index_tensor(cu_q, at::kLong, selected.device()),
                                   moba_index_tensor(cu_k, at::kLong, selected.device()), q_heads,
                                   kv_heads, chunk.q_index, keys.entries);
    return;
  }
#endif
  TORCH_CHECK(selected.device().is_cpu(), "MoBA varlen indices: no implementation for ",
              selected.device());
  const int64_t group = q_heads / kv_heads;
  const int32_t* ids = selected.const_data_ptr<int32_t>();
  const int64_t* t = table.const_data_ptr<int64_t>();
  int64_t* q_index = chunk.q_index.mutable_data_ptr<int64_t>();
  int64_t* entries = keys.entries.mutable_data_ptr<int64_t>();
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t h = rows[i] / blocks, b = rows[i] % blocks, g = h / group;
    const int64_t* block = t + b * kBlockFields;
    for (int64_t r = 0; r < block[kBlockQueryLen]; ++r) {
      q_index[cu_q[i] + r] = (block[kBlockQueryStart] + r) * q_heads + h;
    }
    int64_t offset = cu_k[i];
    for (int64_t s = 0; s < capacity; ++s) {
      const int64_t j = ids[rows[i] * capacity + s];
      if (j < 0) break;
      if (j == b) continue;
      const int64_t* key_block = t + j * kBlockFields;
      int64_t* entry = entries + (static_cast<int64_t>(i) * capacity + s) * kKeyBlockFields;
      entry[kKeyBlockSource] = key_block[kBlockKeyStart];
      entry[kKeyBlockTokens] = key_block[kBlockKeyLen];
      entry[kKeyBlockTarget] = offset;
      entry[kKeyBlockHead] = g;
      offset += key_block[kBlockKeyLen];
    }
  }
}

void moba_varlen_plan_diagonal(const BlockLayout& layout, const at::Device& device, MobaVarlenPlan& plan) {
  plan.causal = layout.causal;
  // Every query block against its own block.
  std::vector<int64_t> cu_q{0}, cu_k{0}, self_keys_index;
  bool every_block_has_queries = true;
  for (const LayoutBlock& block : layout.blocks) {
    if (block.query_len == 0) {
      every_block_has_queries = false;
      continue;
    }
    cu_q.push_back(cu_q.back() + block.query_len);
    cu_k.push_back(cu_k.back() + block.key_len);
    plan.self_max_q = std::max(plan.self_max_q, block.query_len);
    plan.self_max_k = std::max(plan.self_max_k, block.key_len);
    for (int64_t t = 0; t < block.key_len; ++t) self_keys_index.push_back(block.key_start + t);
  }
  plan.self_cu_q = moba_index_tensor(cu_q, at::kInt, device);
  plan.self_cu_k = moba_index_tensor(cu_k, at::kInt, device);
  if (!every_block_has_queries) plan.self_kv_index = moba_index_tensor(self_keys_index, at::kLong, device);
}

MobaVarlenPlan moba_varlen_plan(const BlockLayout& layout, const MobaRouting& routing,
                                int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                                int64_t element_bytes, double scale,
                                int64_t gathered_bytes_per_chunk) {
  const at::Device device = routing.selected.device();
  MobaVarlenPlan plan;
  plan.scale = scale;
  moba_varlen_plan_diagonal(layout, device, plan);

  // Part 2: rows with other selected blocks, in chunks.
  const std::vector<int64_t> other = other_keys_per_row(layout, routing);
  const at::Tensor table = block_layout_table(layout).to(device);
  const at::Tensor selected = routing.selected.contiguous();
  const int64_t blocks = layout.num_blocks();
  const int64_t bytes_per_key = 2 * head_dim * element_bytes;  // gathered k and v
  size_t row = 0;
  while (row < other.size()) {
    std::vector<int64_t> rows, chunk_cu_q{0}, chunk_cu_k{0};
    MobaVarlenChunk chunk;
    for (; row < other.size(); ++row) {
      if (other[row] == 0) continue;
      if (!rows.empty() && (chunk_cu_k.back() + other[row]) * bytes_per_key > gathered_bytes_per_chunk) {
        break;
      }
      const int64_t query_len = layout.blocks[row % blocks].query_len;
      rows.push_back(static_cast<int64_t>(row));
      chunk_cu_q.push_back(chunk_cu_q.back() + query_len);
      chunk_cu_k.push_back(chunk_cu_k.back() + other[row]);
      chunk.max_q = std::max(chunk.max_q, query_len);
      chunk.max_k = std::max(chunk.max_k, other[row]);
    }
    if (rows.empty()) break;
    chunk.cu_q = moba_index_tensor(chunk_cu_q, at::kInt, device);
    chunk.cu_k = moba_index_tensor(chunk_cu_k, at::kInt, device);
    moba_build_varlen_indices(selected, table, rows, chunk_cu_q, chunk_cu_k, q_heads, kv_heads,
                              layout.total_keys, layout.block_size, chunk);
    plan.chunks.push_back(std::move(chunk));
  }
  return plan;
}

std::pair<at::Tensor, at::Tensor> moba_varlen_attention(const at::Tensor& q, const at::Tensor& k,
                                                        const at::Tensor& v,
                                                        const MobaVarlenPlan& plan,
                                                        const VarlenAttentionOps& ops) {
  TORCH_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous(),
              "moba_varlen_attention: q, k, v must be contiguous");
  if (q.size(0) == 0) {  // no segment for the varlen op; keep q's autograd graph
    return {q * 1, at::zeros({0, q.size(1)}, q.options().dtype(at::toOpMathType(q.scalar_type())))};
  }
  auto outputs = MobaVarlenFunction::apply(q, k, v, &plan, &ops);
  return {outputs[0], outputs[1]};
}

}  // namespace sb
