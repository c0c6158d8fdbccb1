#include "kernels/attention/patterns/moba/moba_ring_selector.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/patterns/moba/moba_attention_backend.h"
#include "kernels/attention/patterns/moba/moba_token_routing.h"

namespace sb {

MobaRingSelector::MobaRingSelector(int64_t block_size, int64_t default_top_k, MobaGate gate)
    : block_size_(block_size), default_top_k_(default_top_k), gate_(gate) {
  if (block_size < 1 || default_top_k < 1) {
    throw std::invalid_argument("MoBA ring attention: block_size and top_k must be >= 1, got " +
                                std::to_string(block_size) + " and " + std::to_string(default_top_k));
  }
}

std::pair<at::Tensor, at::Tensor> moba_ring_block_means(const at::Tensor& q, const at::Tensor& k,
                                                        const RingShardTiles& mine, const BlockLayout& layout,
                                                        RingSelectionTimer& timer, bool with_queries) {
  const c10::NoGradGuard no_grad;
  // Summed and all-reduced on q's device (an NCCL group takes device tensors only).
  const at::Tensor index = at::tensor(mine.block_of_rows(), at::kLong).to(q.device());
  const int64_t blocks = layout.num_blocks(), q_heads = with_queries ? q.size(1) : 0, dim = q.size(2);
  at::Tensor sums = at::zeros({blocks, q_heads + k.size(1), dim}, q.options().dtype(at::kDouble));
  // In chunks of rows, so that the float64 copies stay small beside bf16 activations.
  constexpr int64_t kRows = 4096;
  for (int64_t first = 0; first < k.size(0); first += kRows) {
    const int64_t rows = std::min(kRows, k.size(0) - first);
    const at::Tensor chunk = index.narrow(0, first, rows);
    if (with_queries) sums.narrow(1, 0, q_heads).index_add_(0, chunk, q.narrow(0, first, rows).to(at::kDouble));
    sums.narrow(1, q_heads, k.size(1)).index_add_(0, chunk, k.narrow(0, first, rows).to(at::kDouble));
  }
  timer.all_reduce(sums, with_queries ? "MoBA's block sums" : "MoBA's key block sums");
  std::vector<double> lengths(blocks);
  for (int64_t b = 0; b < blocks; ++b) lengths[b] = static_cast<double>(layout.blocks[b].key_len);
  const at::Tensor means = sums / at::tensor(lengths, at::kDouble).to(sums.device()).view({blocks, 1, 1});
  return {means.narrow(1, 0, q_heads), means.narrow(1, q_heads, k.size(1))};
}

namespace {

// Runs of this rank's queries with consecutive positions of one sequence in consecutive
// rows (its tiles joined where they continue each other).
std::vector<MobaQueryRun> query_runs(const RingShardTiles& mine) {
  std::vector<MobaQueryRun> runs;
  for (const RingTile& tile : mine.tiles) {
    if (!runs.empty()) {
      MobaQueryRun& last = runs.back();
      if (last.sequence == tile.sequence && last.row + last.count == tile.local_start &&
          last.position + last.count == tile.position) {
        last.count += tile.length;
        continue;
      }
    }
    runs.push_back({tile.sequence, tile.local_start, tile.position, tile.length});
  }
  return runs;
}

// Each block keeps only itself (causal): the token gate's own block, the same for every head.
RingBlockPattern diagonal_blocks(const BlockLayout& layout) {
  const int64_t blocks = layout.num_blocks();
  return {at::arange(blocks, at::kInt).view({1, blocks, 1}).contiguous(), at::ones({1, blocks}, at::kInt)};
}

// The token routing's earlier blocks per (head, query row): its selection without the
// query's own block.
std::shared_ptr<const RingQueryBlockLists> earlier_blocks(const at::Tensor& selected, const RingShardTiles& mine,
                                                          int64_t num_blocks) {
  const at::Tensor ids = selected.to(at::kInt).cpu();  // [Hq, Tq, cap]
  const at::Tensor own = at::tensor(mine.block_of_rows(), at::kInt).view({1, -1, 1});
  return std::make_shared<const RingQueryBlockLists>(ids.masked_fill(ids.eq(own), -1), num_blocks);
}

}  // namespace

RingCallPattern MobaRingSelector::select(const RingSelectionInputs& in) {
  MobaParams params = moba_params_for_request(in.request, block_size_, default_top_k_, in.scale,
                                              in.geometry.sequences.num_sequences(), in.layer);
  params.sum_over_head_shards = in.head_shard_sum;
  params.gate = gate_;
  const RingShardTiles& mine = in.geometry.shards[in.context.rank()];
  RingSelectionTimer timer(in.context, in.call, in.q.device());
  RingCallPattern pattern;
  if (gate_ == MobaGate::kBlock) {
    auto [query_means, key_means] = moba_ring_block_means(in.q, in.k, mine, in.geometry.layout, timer, true);
    // The routing runs on the host, from the same numbers on every rank.
    MobaRouting routing = moba_route_from_means(query_means.permute({1, 0, 2}).cpu().contiguous(),
                                                key_means.permute({1, 0, 2}).cpu().contiguous(), in.geometry.layout,
                                                params);
    pattern.blocks = {routing.selected, routing.selected_count};
    pattern.stats = moba_layer_stats(in.layer, std::move(routing));
  } else {
    // Each rank routes its own queries against every block's key mean; the call's floor,
    // curve and coverage are summed over the group, so every rank has the same.
    const at::Tensor key_means = moba_ring_block_means(in.q, in.k, mine, in.geometry.layout, timer, false).second;
    MobaRouting routing = moba_route_token_runs(
        in.q, key_means.contiguous(), query_runs(mine), in.geometry.layout, params,
        [&timer](std::vector<double>& values) { timer.sum(values, "MoBA's token coverage sums"); });
    pattern.blocks = diagonal_blocks(in.geometry.layout);
    pattern.query_blocks = earlier_blocks(routing.selected, mine, in.geometry.layout.num_blocks());
    pattern.stats = moba_layer_stats(in.layer, std::move(routing));
  }
  timer.record();
  return pattern;
}

}  // namespace sb
