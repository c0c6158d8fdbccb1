#include "kernels/attention/patterns/vertical_slash/vertical_slash_block_sparse_plan.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/attention/patterns/vertical_slash/vertical_slash_blocks.h"

namespace sb {
namespace {

// An int32 host tensor of `sizes` filled from `values`.
at::Tensor int_tensor(const std::vector<int32_t>& values, at::IntArrayRef sizes) {
  at::Tensor t = at::empty(sizes, at::kInt);
  std::copy(values.begin(), values.end(), t.mutable_data_ptr<int32_t>());
  return t;
}

int64_t common_block_size(const std::vector<std::vector<VerticalSlashHeadIndex>>& index, const PackedSequences& sequences,
                          int64_t q_heads) {
  int64_t block = 0;
  for (size_t s = 0; s < index.size(); ++s) {
    if (sequences.length(static_cast<int64_t>(s)) == 0) continue;
    if (static_cast<int64_t>(index[s].size()) != q_heads) {
      throw std::invalid_argument("vertical-slash plan: sequence " + std::to_string(s) + " has " +
                                  std::to_string(index[s].size()) + " head indexes for " + std::to_string(q_heads) +
                                  " query heads");
    }
    for (const VerticalSlashHeadIndex& head : index[s]) {
      if (head.block_size < 1 || (block != 0 && head.block_size != block)) {
        throw std::invalid_argument("vertical-slash plan: every head needs the same block_size >= 1, got " +
                                    std::to_string(head.block_size) + " beside " + std::to_string(block));
      }
      block = head.block_size;
      // The diagonal block must be reached (offset 0 kept): the vertical part assumes every
      // listed vertical lies before its query block, which only the diagonal guarantees.
      if (head.slashes.empty() || head.slashes.front() != 0) {
        throw std::invalid_argument("vertical-slash plan: sequence " + std::to_string(s) +
                                    " has a head without slash offset 0 (each query itself); every index keeps it");
      }
    }
  }
  return block == 0 ? 1 : block;
}

// The block offsets a head's slashes reach from a query block with `rows` queries,
// ascending (0 among them: offset 0 is kept), those below `blocks`.
std::vector<int64_t> reached_offsets(const VerticalSlashHeadIndex& head, int64_t rows, int64_t blocks) {
  const int64_t block = head.block_size;
  std::vector<int64_t> offsets;
  for (const int64_t d : head.slashes) {
    const int64_t e = d / block, r = d % block;
    if (r < rows && e < blocks) offsets.push_back(e);
    if (r > 0 && e + 1 < blocks) offsets.push_back(e + 1);
  }
  std::sort(offsets.begin(), offsets.end());
  offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());
  return offsets;
}

// Per (head, query block) of one sequence, which of the head's verticals the vertical part
// lists: those before the query block whose key block no slash reaches from it. verticals
// [H, V] (-1 padding), covered [H, 2, NB] (offsets reached from full query blocks, then
// from the last one), on one device. Returns the listed verticals' positions in
// (head, query block, vertical) order and the count per (head, query block) [H, NB].
std::pair<at::Tensor, at::Tensor> listed_verticals(const at::Tensor& verticals, const at::Tensor& covered,
                                                   int64_t block) {
  const int64_t heads = verticals.size(0), width = verticals.size(1), blocks = covered.size(2);
  const auto longs = verticals.options();
  const at::Tensor query_block = at::arange(blocks, longs);
  const at::Tensor offset = query_block.view({1, blocks, 1}) - at::div(verticals, block, "floor").view({heads, 1, width});
  const at::Tensor before = verticals.ge(0).view({heads, 1, width}) & offset.ge(1);  // [H, NB, V]
  // covered[h, last?, offset] for each (h, m, v)
  const at::Tensor row = (at::arange(heads, longs).view({heads, 1, 1}) * 2 + query_block.eq(blocks - 1).view({1, blocks, 1})) * blocks;
  const at::Tensor reached = covered.reshape({-1}).index_select(0, (row + offset.clamp(0, blocks - 1)).reshape({-1}));
  const at::Tensor listed = before & reached.view({heads, blocks, width}).logical_not();
  const at::Tensor where = listed.nonzero();  // [N, 3], row-major: (head, query block, vertical)
  const at::Tensor positions =
      verticals.reshape({-1}).index_select(0, where.select(1, 0) * width + where.select(1, 2));
  return {positions, listed.sum(2)};
}

}  // namespace

VerticalSlashBlockSparsePlan vertical_slash_block_sparse_plan(
    const PackedSequences& sequences, const std::vector<std::vector<VerticalSlashHeadIndex>>& index, int64_t q_heads,
    int64_t kv_heads, const at::Device& device, int64_t max_batch_elements) {
  if (static_cast<int64_t>(index.size()) != sequences.num_sequences()) {
    throw std::invalid_argument("vertical-slash plan: " + std::to_string(index.size()) + " sequence indexes for " +
                                std::to_string(sequences.num_sequences()) + " sequences");
  }
  if (kv_heads < 1 || q_heads % kv_heads != 0) {
    throw std::invalid_argument("vertical-slash plan: query heads " + std::to_string(q_heads) +
                                " must be a multiple of key/value heads " + std::to_string(kv_heads));
  }
  const int64_t block = common_block_size(index, sequences, q_heads);
  const int64_t group = q_heads / kv_heads, tokens = sequences.total_tokens();
  VerticalSlashBlockSparsePlan plan;
  plan.slash_layout = BlockLayout::build(sequences, sequences, block, /*causal=*/true);
  const BlockLayout& layout = plan.slash_layout;
  const int64_t blocks = layout.num_blocks();
  plan.kept_pairs_per_sequence.assign(static_cast<size_t>(sequences.num_sequences()), 0);

  std::vector<std::vector<int32_t>> slash_lists(static_cast<size_t>(q_heads * blocks));
  std::vector<at::Tensor> rows, counts;  // per sequence, on `device`
  const auto longs = at::TensorOptions().dtype(at::kLong);
  for (int64_t s = 0; s < sequences.num_sequences(); ++s) {
    const int64_t length = sequences.length(s);
    if (length == 0) continue;
    const int64_t first_block = layout.sequence_first_block[static_cast<size_t>(s)];
    const int64_t seq_blocks = layout.blocks_in_sequence(s), last_rows = length - (seq_blocks - 1) * block;
    const auto& heads = index[static_cast<size_t>(s)];
    size_t width = 1;
    for (const VerticalSlashHeadIndex& head : heads) width = std::max(width, head.verticals.size());
    at::Tensor verticals = at::full({q_heads, static_cast<int64_t>(width)}, -1, longs);
    at::Tensor covered = at::zeros({q_heads, 2, seq_blocks}, at::kBool);
    for (int64_t h = 0; h < q_heads; ++h) {
      const VerticalSlashHeadIndex& head = heads[static_cast<size_t>(h)];
      plan.kept_pairs_per_sequence[static_cast<size_t>(s)] += vertical_slash_kept_pairs(head, length);
      const std::vector<int64_t> full = reached_offsets(head, block, seq_blocks);
      const std::vector<int64_t> last = reached_offsets(head, last_rows, seq_blocks);
      for (int64_t m = 0; m < seq_blocks; ++m) {
        std::vector<int32_t>& list = slash_lists[static_cast<size_t>(h * blocks + first_block + m)];
        for (const int64_t o : m == seq_blocks - 1 ? last : full) {
          if (o > m) break;
          list.push_back(static_cast<int32_t>(first_block + m - o));
        }
      }
      bool* c = covered[h].mutable_data_ptr<bool>();
      for (const int64_t o : full) c[o] = true;
      for (const int64_t o : last) c[seq_blocks + o] = true;
      int64_t* v = verticals[h].mutable_data_ptr<int64_t>();
      for (const int64_t j : head.verticals) {
        if (j >= 0 && j < length) *v++ = j;
      }
    }
    plan.kept_pairs += plan.kept_pairs_per_sequence[static_cast<size_t>(s)];
    // Heads in batches: listed_verticals holds [heads, NB, V] temporaries.
    const int64_t per_head = std::max<int64_t>(1, seq_blocks * static_cast<int64_t>(width));
    const int64_t batch = std::clamp<int64_t>(max_batch_elements / per_head, 1, q_heads);
    const at::Tensor device_verticals = verticals.to(device), device_covered = covered.to(device);
    for (int64_t first = 0; first < q_heads; first += batch) {
      const int64_t heads = std::min(batch, q_heads - first);
      auto [positions, per_block] =
          listed_verticals(device_verticals.narrow(0, first, heads), device_covered.narrow(0, first, heads), block);
      // Rows of k taken [Hkv x T, D]: key/value head h / group, the sequence's offset.
      const at::Tensor head_of =
          at::repeat_interleave(at::arange(first, first + heads, positions.options()), per_block.sum(1));
      rows.push_back(at::div(head_of, group, "floor") * tokens + sequences.offsets[static_cast<size_t>(s)] + positions);
      counts.push_back(per_block.reshape({-1}));
    }
  }

  // Slash part: [Hq, NB, capacity], -1 padding.
  size_t capacity = 1;
  for (const auto& list : slash_lists) capacity = std::max(capacity, list.size());
  std::vector<int32_t> selected(static_cast<size_t>(q_heads * blocks) * capacity, -1), count;
  count.reserve(slash_lists.size());
  for (size_t r = 0; r < slash_lists.size(); ++r) {
    std::copy(slash_lists[r].begin(), slash_lists[r].end(), selected.begin() + static_cast<int64_t>(r * capacity));
    count.push_back(static_cast<int32_t>(slash_lists[r].size()));
  }
  plan.slash_selected = int_tensor(selected, {q_heads, blocks, static_cast<int64_t>(capacity)});
  plan.slash_count = int_tensor(count, {q_heads, blocks});

  // Vertical part: blocks in (sequence, head, query block) order, each its own key range.
  plan.vertical_rows = rows.empty() ? at::empty({0}, longs.device(device)) : at::cat(rows);
  const at::Tensor host_counts = counts.empty() ? at::empty({0}, longs) : at::cat(counts).to(at::kCPU).contiguous();
  const int64_t* per_block = host_counts.const_data_ptr<int64_t>();
  BlockLayout& vertical = plan.vertical_layout;
  vertical.block_size = block;
  vertical.causal = false;
  vertical.total_queries = q_heads * tokens;
  vertical.total_keys = plan.vertical_rows.numel();
  std::vector<int32_t> vertical_selected, vertical_count;
  int64_t key_start = 0;
  for (int64_t s = 0; s < sequences.num_sequences(); ++s) {
    for (int64_t h = 0; h < q_heads; ++h) {
      for (int64_t b = layout.sequence_first_block[static_cast<size_t>(s)];
           b < layout.sequence_first_block[static_cast<size_t>(s) + 1]; ++b) {
        const LayoutBlock& qb = layout.blocks[static_cast<size_t>(b)];
        LayoutBlock vb;
        vb.sequence = qb.sequence;
        vb.index_in_sequence = qb.index_in_sequence;
        vb.query_start = h * tokens + qb.query_start;
        vb.query_len = qb.query_len;
        vb.query_pos0 = qb.query_pos0;
        vb.key_start = key_start;
        vb.key_len = *per_block++;
        key_start += vb.key_len;
        const auto r = static_cast<int32_t>(vertical.blocks.size());
        vertical_selected.push_back(vb.key_len > 0 ? r : -1);
        vertical_count.push_back(vb.key_len > 0 ? 1 : 0);
        vertical.blocks.push_back(vb);
      }
    }
  }
  TORCH_CHECK(key_start == vertical.total_keys, "vertical-slash plan: the per-block counts do not add up");
  vertical.sequence_first_block = {0, q_heads * blocks};  // one "sequence": the block ids are all it uses
  vertical.max_blocks_per_sequence = q_heads * blocks;
  plan.vertical_selected = int_tensor(vertical_selected, {1, q_heads * blocks, 1});
  plan.vertical_count = int_tensor(vertical_count, {1, q_heads * blocks});
  return plan;
}

}  // namespace sb
