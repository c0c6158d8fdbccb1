#include "kernels/attention/patterns/sliding_window/sliding_window_ring_selector.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "kernels/attention/patterns/sliding_window/sliding_window_backend.h"
#include "kernels/attention/ring/ring_attention.h"
#include "kernels/attention/core/device_completion.h"

namespace sb {

SlidingWindowMass sliding_window_ring_mass(const RingSelectionInputs& in, int64_t sinks) {
  using Clock = std::chrono::steady_clock;
  const c10::NoGradGuard no_grad;
  const auto start = Clock::now();
  double waited = 0;
  const auto all_reduce = [&](at::Tensor& t, c10d::ReduceOp::RedOpType op, const char* what) {
    const auto before = Clock::now();
    in.context.all_reduce(t, op, what, in.call);
    waited += std::chrono::duration<double>(Clock::now() - before).count();
  };
  const RingGeometry& g = in.geometry;
  const RingShardTiles& mine = g.shards[in.context.rank()];
  const int64_t sequences = g.sequences.num_sequences(), q_heads = in.q.size(1), dim = in.q.size(2);
  const int64_t group = q_heads / in.k.size(1);
  const auto dev = in.q.options().dtype(at::kDouble);
  // Every sequence's last n_s queries, one block of rows each: [N, Hq, D].
  std::vector<int64_t> first_row(sequences + 1, 0), last_count(sequences, 0);
  for (int64_t s = 0; s < sequences; ++s) {
    last_count[s] = std::min(kSlidingWindowCoverageQueries, g.sequences.length(s));
    first_row[s + 1] = first_row[s] + last_count[s];
  }
  // This rank's tokens by sequence: rows in its shard and positions in the sequence.
  std::vector<std::vector<int64_t>> rows_of(sequences), positions_of(sequences);
  for (const RingTile& tile : mine.tiles) {
    for (int64_t t = 0; t < tile.length; ++t) {
      rows_of[tile.sequence].push_back(tile.local_start + t);
      positions_of[tile.sequence].push_back(tile.position + t);
    }
  }
  const auto index_tensor = [&](const std::vector<int64_t>& v) { return at::tensor(v, at::kLong).to(in.q.device()); };
  at::Tensor last = at::zeros({first_row[sequences], q_heads, dim}, dev);
  for (int64_t s = 0; s < sequences; ++s) {
    std::vector<int64_t> src, dst;
    const int64_t length = g.sequences.length(s);
    for (size_t i = 0; i < rows_of[s].size(); ++i) {
      if (positions_of[s][i] < length - last_count[s]) continue;
      src.push_back(rows_of[s][i]);
      dst.push_back(first_row[s] + positions_of[s][i] - (length - last_count[s]));
    }
    if (!src.empty()) last.index_copy_(0, index_tensor(dst), in.q.index_select(0, index_tensor(src)).to(at::kDouble));
  }
  all_reduce(last, c10d::ReduceOp::SUM, "sliding-window's last queries");
  // Scores of the last queries against this rank's keys, per sequence: [Hq, n_s, m_s].
  std::vector<at::Tensor> scores(sequences);
  at::Tensor row_max = at::full({first_row[sequences], q_heads}, -INFINITY, dev);
  for (int64_t s = 0; s < sequences; ++s) {
    if (rows_of[s].empty() || last_count[s] == 0) continue;
    const int64_t length = g.sequences.length(s), n = last_count[s];
    const at::Tensor keys = in.k.index_select(0, index_tensor(rows_of[s])).to(at::kDouble)
                                .repeat_interleave(group, 1).permute({1, 2, 0});            // [Hq, D, m]
    const at::Tensor queries = last.narrow(0, first_row[s], n).permute({1, 0, 2});          // [Hq, n, D]
    const at::Tensor query_pos = at::arange(length - n, length, at::TensorOptions().dtype(at::kLong).device(in.q.device()))
                                     .view({1, n, 1});
    const at::Tensor key_pos = index_tensor(positions_of[s]).view({1, 1, -1});
    scores[s] = at::matmul(queries, keys).mul(in.scale).masked_fill(key_pos.gt(query_pos), -INFINITY);
    row_max.narrow(0, first_row[s], n).copy_(std::get<0>(scores[s].max(2)).transpose(0, 1));
  }
  all_reduce(row_max, c10d::ReduceOp::MAX, "sliding-window's score maxima");
  at::Tensor row_sum = at::zeros_like(row_max);
  for (int64_t s = 0; s < sequences; ++s) {
    if (!scores[s].defined()) continue;
    const at::Tensor top = row_max.narrow(0, first_row[s], last_count[s]).transpose(0, 1).unsqueeze(2);  // [Hq, n, 1]
    scores[s] = scores[s].sub(top).exp();  // masked: exp(-inf) = 0
    row_sum.narrow(0, first_row[s], last_count[s]).copy_(scores[s].sum(2).transpose(0, 1));
  }
  all_reduce(row_sum, c10d::ReduceOp::SUM, "sliding-window's softmax denominators");
  // Per sequence: the sink mass, then the window mass by distance d = p - j (sinks left out),
  // summed over the heads and last queries; all sequences in one vector.
  std::vector<int64_t> offset(sequences + 1, 0);
  for (int64_t s = 0; s < sequences; ++s) offset[s + 1] = offset[s] + 1 + g.sequences.length(s);
  at::Tensor sums = at::zeros({offset[sequences]}, dev);
  for (int64_t s = 0; s < sequences; ++s) {
    if (!scores[s].defined()) continue;
    const int64_t length = g.sequences.length(s), n = last_count[s];
    const at::Tensor denominators = row_sum.narrow(0, first_row[s], n).transpose(0, 1).unsqueeze(2);
    const at::Tensor attention = scores[s].div(denominators);                                  // [Hq, n, m]
    const at::Tensor key_pos = index_tensor(positions_of[s]);                                   // [m]
    const at::Tensor is_sink = key_pos.lt(sinks);
    sums.narrow(0, offset[s], 1).add_(attention.masked_fill(is_sink.logical_not().view({1, 1, -1}), 0).sum());
    const at::Tensor distance = at::arange(length - n, length, key_pos.options()).view({n, 1}).sub(key_pos.view({1, -1}));
    const at::Tensor counted = distance.ge(0).logical_and(is_sink.logical_not().view({1, -1}));  // [n, m]
    const at::Tensor weights = attention.masked_fill(counted.logical_not().unsqueeze(0), 0).sum(0);  // [n, m]
    sums.narrow(0, offset[s] + 1, length).index_add_(0, distance.clamp_min(0).flatten(), weights.flatten());
  }
  wait_for_device_work(sums.device());
  const auto computed = Clock::now();
  all_reduce(sums, c10d::ReduceOp::SUM, "sliding-window's kept mass");
  const at::Tensor host = sums.cpu();
  const double* data = host.const_data_ptr<double>();
  SlidingWindowMass mass;
  for (int64_t s = 0; s < sequences; ++s) {
    const int64_t length = g.sequences.length(s);
    mass.rows.push_back(static_cast<double>(q_heads * last_count[s]));
    std::vector<double> kept(static_cast<size_t>(length));
    double running = data[offset[s]];
    for (int64_t d = 0; d < length; ++d) {
      running += data[offset[s] + 1 + d];
      kept[static_cast<size_t>(d)] = running;  // window d + 1 keeps the distances 0 .. d
    }
    mass.kept.push_back(std::move(kept));
  }
  // The step's compute and waits as one event: compute until the last sums, the waits the rest.
  RingStepEvent event{in.call, false, kRingSelectionStep, in.context.rank()};
  const auto compute_end = computed - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(waited));
  ring_record_step(in.context, event, start, std::max(start, compute_end));
  return mass;
}

RingCallPattern SlidingWindowRingSelector::select(const RingSelectionInputs& in) {
  SlidingWindowMass mass = sliding_window_ring_mass(in, options_.sink_tokens);
  if (in.head_shard_sum) {  // under TP as well: the coverage over every head
    std::vector<double> flat = mass.flatten();
    in.head_shard_sum(flat);
    mass.unflatten(flat);
  }
  SlidingWindowChoice choice = sliding_window_choice(in.request, options_.window, mass,
                                                     in.geometry.sequences.num_sequences(), in.layer);
  // Query block b keeps the key blocks of its sequence, up to itself, that its rows' windows
  // or the sinks reach; the band cuts the pairs inside them.
  const BlockLayout& layout = in.geometry.layout;
  const int64_t blocks = layout.num_blocks(), block = layout.block_size;
  std::vector<std::vector<int32_t>> kept(static_cast<size_t>(blocks));
  int64_t capacity = 1;
  for (int64_t b = 0; b < blocks; ++b) {
    const LayoutBlock& qb = layout.blocks[b];
    if (qb.query_len == 0) continue;
    const int64_t window = choice.windows[static_cast<size_t>(qb.sequence)];
    const int64_t first_position = qb.index_in_sequence * block;  // the block's first query
    for (int64_t c = layout.eligible_first(b); c < layout.eligible_end(b); ++c) {
      const int64_t key_first = layout.blocks[c].index_in_sequence * block;
      const int64_t key_last = key_first + layout.blocks[c].key_len - 1;
      // Some query p of b keeps some key j of c when first p - last j < W.
      const bool in_window = first_position - key_last < window || c == b;
      const bool has_sinks = key_first < options_.sink_tokens;
      if (in_window || has_sinks) kept[b].push_back(static_cast<int32_t>(c));
    }
    capacity = std::max<int64_t>(capacity, static_cast<int64_t>(kept[b].size()));
  }
  RingCallPattern pattern;
  pattern.blocks.selected = at::full({1, blocks, capacity}, -1, at::kInt);
  pattern.blocks.count = at::zeros({1, blocks}, at::kInt);
  int32_t* selected = pattern.blocks.selected.mutable_data_ptr<int32_t>();
  int32_t* count = pattern.blocks.count.mutable_data_ptr<int32_t>();
  for (int64_t b = 0; b < blocks; ++b) {
    std::copy(kept[b].begin(), kept[b].end(), selected + b * capacity);
    count[b] = static_cast<int32_t>(kept[b].size());
  }
  pattern.blocks.band_window = choice.windows;
  pattern.blocks.band_sinks = options_.sink_tokens;
  pattern.stats = std::move(choice.stats);
  return pattern;
}

}  // namespace sb
