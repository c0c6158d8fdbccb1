#include "kernels/attention/patterns/moba/moba_token_varlen_plan.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "kernels/attention/patterns/moba/moba_key_blocks.h"

namespace sb {

MobaVarlenPlan moba_token_varlen_plan(const BlockLayout& layout, const MobaRouting& routing, int64_t q_heads,
                                      int64_t kv_heads, int64_t head_dim, int64_t element_bytes, double scale,
                                      int64_t gathered_bytes_per_chunk) {
  TORCH_CHECK(routing.gate == MobaGate::kToken, "moba_token_varlen_plan: a token-gate routing expected");
  const at::Device device = routing.selected.device();
  const int64_t tq = layout.total_queries, blocks = layout.num_blocks(), capacity = routing.selected.size(2);
  TORCH_CHECK(routing.selected.size(0) == q_heads && routing.selected.size(1) == tq,
              "moba_token_varlen_plan: the routing does not hold [Hq, Tq, kcap] rows of this layout");
  MobaVarlenPlan plan;
  plan.scale = scale;
  plan.slots = capacity;
  moba_varlen_plan_diagonal(layout, device, plan);

  // Each query's own block (global id), to leave it out of part 2.
  std::vector<int64_t> own_block(tq, 0);
  for (int64_t b = 0; b < blocks; ++b) {
    const LayoutBlock& block = layout.blocks[b];
    std::fill(own_block.begin() + block.query_start, own_block.begin() + block.query_start + block.query_len, b);
  }
  const at::Tensor selected = routing.selected.to(at::kLong);  // [Hq, Tq, kcap]
  const at::Tensor other = selected.ge(0).logical_and(
      selected.ne(moba_index_tensor(own_block, at::kLong, device).view({1, -1, 1})));
  const at::Tensor entry = other.flatten().nonzero().squeeze(1);  // (h, t, slot) order
  if (entry.numel() == 0) return plan;
  const at::Tensor head = entry.div(tq * capacity, "floor");
  const at::Tensor row = entry.div(capacity, "floor").remainder(tq) * q_heads + head;  // t * Hq + h
  const at::Tensor segment = head * blocks + selected.flatten().index_select(0, entry);
  // Stable: inside a segment the queries stay in order.
  const at::Tensor order = std::get<1>(at::sort(segment, /*stable=*/true, 0, /*descending=*/false));
  const at::Tensor q_index = row.index_select(0, order);
  const at::Tensor slot_index = (row * capacity + entry.remainder(capacity)).index_select(0, order);
  const at::Tensor counts_host = at::bincount(segment, {}, q_heads * blocks).cpu();
  const int64_t* counts = counts_host.const_data_ptr<int64_t>();

  const int64_t key_bytes = 2 * head_dim * element_bytes;    // gathered k and v
  const int64_t query_bytes = 4 * head_dim * element_bytes;  // gathered q, its output, dO, dq
  const int64_t group = q_heads / kv_heads;
  int64_t segment_id = 0, first_query = 0;
  const int64_t segments = q_heads * blocks;
  while (segment_id < segments) {
    std::vector<int64_t> cu_q{0}, cu_k{0}, entries;
    MobaVarlenChunk chunk;
    for (; segment_id < segments; ++segment_id) {
      const int64_t n = counts[segment_id];
      if (n == 0) continue;
      const LayoutBlock& block = layout.blocks[segment_id % blocks];
      if (cu_q.size() > 1 &&
          (cu_k.back() + block.key_len) * key_bytes + (cu_q.back() + n) * query_bytes > gathered_bytes_per_chunk) {
        break;
      }
      entries.insert(entries.end(), {block.key_start, block.key_len, cu_k.back(), (segment_id / blocks) / group});
      cu_q.push_back(cu_q.back() + n);
      cu_k.push_back(cu_k.back() + block.key_len);
      chunk.max_q = std::max(chunk.max_q, n);
      chunk.max_k = std::max(chunk.max_k, block.key_len);
    }
    if (cu_q.size() == 1) break;
    chunk.q_index = q_index.narrow(0, first_query, cu_q.back());
    chunk.slot_index = slot_index.narrow(0, first_query, cu_q.back());
    first_query += cu_q.back();
    chunk.cu_q = moba_index_tensor(cu_q, at::kInt, device);
    chunk.cu_k = moba_index_tensor(cu_k, at::kInt, device);
    MobaKeyBlocks& keys = chunk.key_blocks;
    keys.entries = moba_index_tensor(entries, at::kLong, device).view({-1, kKeyBlockFields});
    keys.gathered_rows = cu_k.back();
    keys.max_tokens = layout.block_size;
    keys.source_tokens = layout.total_keys;
    keys.source_heads = kv_heads;
    plan.chunks.push_back(std::move(chunk));
  }
  return plan;
}

}  // namespace sb
