#include "kernels/attention/patterns/moba/moba_ring_selector.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <vector>

#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/patterns/moba/moba_attention_backend.h"
#include "kernels/attention/core/device_completion.h"

namespace sb {

MobaRingSelector::MobaRingSelector(int64_t block_size, int64_t default_top_k)
    : block_size_(block_size), default_top_k_(default_top_k) {
  if (block_size < 1 || default_top_k < 1) {
    throw std::invalid_argument("MoBA ring attention: block_size and top_k must be >= 1, got " +
                                std::to_string(block_size) + " and " + std::to_string(default_top_k));
  }
}

std::pair<at::Tensor, at::Tensor> moba_ring_block_means(const at::Tensor& q, const at::Tensor& k,
                                                        const RingShardTiles& mine, const BlockLayout& layout,
                                                        RingContext& context, int64_t call) {
  using Clock = std::chrono::steady_clock;
  const c10::NoGradGuard no_grad;
  const auto start = Clock::now();
  std::vector<int64_t> block_of_token(mine.tokens);
  for (const RingTile& tile : mine.tiles) {
    std::fill(block_of_token.begin() + tile.local_start, block_of_token.begin() + tile.local_start + tile.length,
              tile.block);
  }
  // Summed and all-reduced on q's device (an NCCL group takes device tensors only); the
  // routing then runs on the host, from the same numbers on every rank.
  const at::Tensor index = at::tensor(block_of_token, at::kLong).to(q.device());
  const int64_t blocks = layout.num_blocks(), q_heads = q.size(1), dim = q.size(2);
  at::Tensor sums = at::zeros({blocks, q_heads + k.size(1), dim}, q.options().dtype(at::kDouble));
  // In chunks of rows, so that the float64 copies stay small beside bf16 activations.
  constexpr int64_t kRows = 4096;
  for (int64_t first = 0; first < q.size(0); first += kRows) {
    const int64_t rows = std::min(kRows, q.size(0) - first);
    const at::Tensor chunk = index.narrow(0, first, rows);
    sums.narrow(1, 0, q_heads).index_add_(0, chunk, q.narrow(0, first, rows).to(at::kDouble));
    sums.narrow(1, q_heads, k.size(1)).index_add_(0, chunk, k.narrow(0, first, rows).to(at::kDouble));
  }
  wait_for_device_work(sums.device());
  const auto summed = Clock::now();
  context.all_reduce(sums, c10d::ReduceOp::SUM, "MoBA's block sums", call);
  sums = sums.cpu();
  // On the timeline as the selection step: the local sums as compute, the all-reduce
  // (with its wait for the slowest rank) as wait.
  ring_record_step(context, RingStepEvent{call, false, kRingSelectionStep, context.rank()}, start, summed);
  std::vector<double> lengths(blocks);
  for (int64_t b = 0; b < blocks; ++b) lengths[b] = static_cast<double>(layout.blocks[b].key_len);
  const at::Tensor means = sums / at::tensor(lengths, at::kDouble).view({blocks, 1, 1});
  return {means.narrow(1, 0, q_heads).permute({1, 0, 2}).contiguous(),
          means.narrow(1, q_heads, k.size(1)).permute({1, 0, 2}).contiguous()};
}

RingCallPattern MobaRingSelector::select(const RingSelectionInputs& in) {
  MobaParams params = moba_params_for_request(in.request, block_size_, default_top_k_, in.scale,
                                              in.geometry.sequences.num_sequences(), in.layer);
  params.sum_over_head_shards = in.head_shard_sum;
  auto [query_means, key_means] = moba_ring_block_means(in.q, in.k, in.geometry.shards[in.context.rank()],
                                                        in.geometry.layout, in.context, in.call);
  MobaRouting routing = moba_route_from_means(query_means, key_means, in.geometry.layout, params);
  RingCallPattern pattern;
  pattern.blocks = {routing.selected, routing.selected_count};
  pattern.stats = moba_layer_stats(in.layer, std::move(routing));
  return pattern;
}

}  // namespace sb
