#include "kernels/attention/patterns/moba/moba_token_routing.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <vector>

namespace sb {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// [Hq, chunk, blocks] float64 scores of one chunk: 4M elements (32 MB) at most.
constexpr int64_t kScoreElementsPerChunk = int64_t{1} << 22;
// Stands for "no block" while a row's ids are sorted ascending (then written as -1).
constexpr int64_t kNoBlock = std::numeric_limits<int32_t>::max();

// One sequence of the call, as the layout places it.
struct SequenceSpan {
  int64_t first_block = 0, blocks = 0;
  int64_t key_offset = 0, keys = 0;
  int64_t query_offset = 0, queries = 0;
};

std::vector<SequenceSpan> sequence_spans(const BlockLayout& layout) {
  std::vector<SequenceSpan> spans(layout.num_sequences());
  for (int64_t s = 0; s < layout.num_sequences(); ++s) {
    SequenceSpan& span = spans[s];
    span.first_block = layout.sequence_first_block[s];
    span.blocks = layout.blocks_in_sequence(s);
    for (int64_t b = span.first_block; b < span.first_block + span.blocks; ++b) {
      const LayoutBlock& block = layout.blocks[b];
      if (b == span.first_block) span.key_offset = block.key_start;
      if (block.query_len > 0 && span.queries == 0) span.query_offset = block.query_start;
      span.keys += block.key_len;
      span.queries += block.query_len;
    }
  }
  return spans;
}

// One chunk of a sequence's queries, ranked in pass 1 and selected in pass 2.
struct RankedChunk {
  int64_t sequence = 0;
  int64_t query_start = 0;  // first query of the chunk in the packed q
  int64_t count = 0;        // queries in the chunk
  at::Tensor order;         // [Hq, n, kc] int64: candidate blocks (in-sequence ids), best first
  at::Tensor sorted_pi;     // [Hq, n, kc] float64: their softmax weights; 0 past the candidates
  at::Tensor pi_diagonal;   // [Hq, n] float64
  at::Tensor diagonal;      // [n] int64: the in-sequence block of each query
  at::Tensor candidates;    // [n] int64: candidate blocks of each query
  int64_t most_candidates = 0;
};

// [nb, Hkv, D] float64: the mean of each block's keys of the sequence.
at::Tensor block_key_means(const at::Tensor& k, const SequenceSpan& span, int64_t block_size) {
  const int64_t padded = span.blocks * block_size;
  at::Tensor keys = k.narrow(0, span.key_offset, span.keys).to(at::kDouble);  // [L, Hkv, D]
  if (padded > span.keys) {
    keys = at::cat({keys, at::zeros({padded - span.keys, k.size(1), k.size(2)}, keys.options())});
  }
  at::Tensor lengths = at::full({span.blocks}, static_cast<double>(block_size), keys.options());
  lengths[span.blocks - 1] = static_cast<double>(span.keys - (span.blocks - 1) * block_size);
  return keys.view({span.blocks, block_size, k.size(1), k.size(2)}).sum(1) / lengths.view({-1, 1, 1});
}

// key_means [nb, Hq, D]: the sequence's blocks, for every query head. The chunk: `count`
// queries at rows query_start.. of q, at positions first_position.. of the sequence.
RankedChunk rank_chunk(const at::Tensor& q, const at::Tensor& key_means, const SequenceSpan& span,
                       int64_t query_start, int64_t first_position, int64_t count, int64_t columns,
                       const BlockLayout& layout) {
  const auto long_options = at::TensorOptions().dtype(at::kLong).device(q.device());
  RankedChunk chunk;  // `columns` (the most ranked candidates wanted) shrinks to what the chunk sees
  chunk.query_start = query_start;
  chunk.count = count;
  chunk.diagonal = at::arange(first_position, first_position + count, long_options).div(layout.block_size, "floor");
  const int64_t last_position = first_position + count - 1;
  chunk.most_candidates = layout.causal ? last_position / layout.block_size : span.blocks - 1;
  // Causal: no query of the chunk sees past the last one's block.
  const int64_t visible = layout.causal ? chunk.most_candidates + 1 : span.blocks;
  columns = std::min(columns, visible - 1);
  const at::Tensor blocks = at::arange(visible, long_options).unsqueeze(0);  // [1, nb]
  const at::Tensor is_diagonal = blocks.eq(chunk.diagonal.unsqueeze(1));    // [n, nb]
  const at::Tensor is_candidate =
      layout.causal ? blocks.lt(chunk.diagonal.unsqueeze(1)) : is_diagonal.logical_not();
  chunk.candidates = layout.causal ? chunk.diagonal : at::full({count}, span.blocks - 1, long_options);

  const at::Tensor queries = q.narrow(0, chunk.query_start, count).to(at::kDouble).transpose(0, 1);  // [Hq, n, D]
  const at::Tensor scores = at::bmm(queries, key_means.narrow(0, 0, visible).permute({1, 2, 0}));  // [Hq, n, nb]
  const at::Tensor eligible = is_candidate.logical_or(is_diagonal);
  const at::Tensor pi = scores.masked_fill(eligible.logical_not(), -kInf).softmax(-1);
  chunk.pi_diagonal = pi.masked_fill(is_diagonal.logical_not(), 0.0).sum(-1);
  // Non-candidates (-inf) rank last; the tie rule: the lower block wins.
  chunk.order = moba_best_blocks(scores.masked_fill(is_candidate.logical_not(), -kInf), columns);
  const at::Tensor real = at::arange(columns, long_options).lt(chunk.candidates.unsqueeze(1));  // [n, kc]
  chunk.sorted_pi = pi.gather(-1, chunk.order).masked_fill(real.logical_not(), 0.0);
  return chunk;
}

// [extent] float64 on the device: sum over the chunk's rows of C(k), k = 1 .. extent.
at::Tensor chunk_curve_sums(const RankedChunk& chunk, int64_t extent) {
  const at::Tensor diagonal = chunk.pi_diagonal.unsqueeze(-1);  // [Hq, n, 1]
  const int64_t take = std::min<int64_t>(extent - 1, chunk.sorted_pi.size(-1));
  at::Tensor curve = at::cat({diagonal, diagonal + chunk.sorted_pi.narrow(-1, 0, take).cumsum(-1)}, -1);
  if (curve.size(-1) < extent) {  // past the chunk's candidates C(k) stays where it is
    curve = at::cat({curve, curve.narrow(-1, curve.size(-1) - 1, 1).expand(
                                {curve.size(0), curve.size(1), extent - curve.size(-1)})},
                    -1);
  }
  return curve.sum(at::IntArrayRef{0, 1});
}

}  // namespace

at::Tensor moba_best_blocks_by_sort(const at::Tensor& scores, int64_t columns) {
  // A stable descending sort keeps equal scores in block order.
  return std::get<1>(at::sort(scores, /*stable=*/true, -1, /*descending=*/true)).narrow(-1, 0, columns).contiguous();
}

at::Tensor moba_best_blocks(const at::Tensor& scores, int64_t columns) {
  if (!scores.device().is_cpu()) return moba_best_blocks_by_sort(scores, columns);
  TORCH_CHECK(scores.scalar_type() == at::kDouble && columns <= scores.size(-1),
              "moba_best_blocks: float64 scores and at most as many columns as blocks expected");
  const at::Tensor rows = scores.contiguous();
  const int64_t blocks = rows.size(-1), count = rows.numel() / std::max<int64_t>(blocks, 1);
  std::vector<int64_t> shape = rows.sizes().vec();
  shape.back() = columns;
  at::Tensor order = at::empty(shape, rows.options().dtype(at::kLong));
  const double* s = rows.const_data_ptr<double>();
  int64_t* out = order.mutable_data_ptr<int64_t>();
  at::parallel_for(0, count, std::max<int64_t>(1, 4096 / std::max<int64_t>(blocks, 1)), [&](int64_t r0, int64_t r1) {
    std::vector<int64_t> ids(blocks);
    for (int64_t r = r0; r < r1; ++r) {
      const double* row = s + r * blocks;
      std::iota(ids.begin(), ids.end(), 0);
      std::partial_sort(ids.begin(), ids.begin() + columns, ids.end(), [row](int64_t a, int64_t b) {
        return row[a] > row[b] || (row[a] == row[b] && a < b);
      });
      std::copy(ids.begin(), ids.begin() + columns, out + r * columns);
    }
  });
  return order;
}

namespace {

// The routing of the queries in `runs` against key_means [NB, Hkv, D] (float64, q's
// device). sum_over_query_shards (null: the runs hold every query of the layout) adds the
// call's sums over the ranks holding its other queries, so every rank's floor, curve and
// coverage are the call's.
MobaRouting route_runs(const at::Tensor& q, const at::Tensor& key_means, const std::vector<MobaQueryRun>& runs,
                       const BlockLayout& layout, const MobaParams& params,
                       const std::function<void(std::vector<double>&)>& sum_over_query_shards) {
  const int64_t q_heads = q.size(1), tq = q.size(0), sequences = layout.num_sequences();
  TORCH_CHECK(q_heads % key_means.size(1) == 0 && key_means.size(0) == layout.num_blocks(),
              "moba token routing: key means [NB, Hkv, D] of the layout's blocks expected");
  const std::vector<int64_t> budgets = moba_budgets_per_sequence(params, sequences);
  const std::vector<SequenceSpan> spans = sequence_spans(layout);
  const auto long_options = at::TensorOptions().dtype(at::kLong).device(q.device());
  const at::Tensor kv_of_head = at::arange(q_heads, long_options).div(q_heads / key_means.size(1), "floor");

  int64_t most_eligible = 0, widest_budget = 1;
  for (int64_t s = 0; s < sequences; ++s) {
    // Its last query (the last position) has every block of the sequence eligible. The
    // whole layout's, so that every rank sums curves of one extent.
    if (spans[s].queries > 0) most_eligible = std::max(most_eligible, spans[s].blocks);
    widest_budget = std::max(widest_budget, budgets[s]);
  }
  const int64_t extent = moba_call_coverage_extent(params, most_eligible);
  if (params.coverage_floor_ratio > 0.0) widest_budget = std::max(widest_budget, params.coverage_reference_k);
  // Columns of ranked candidates every later step may read.
  const int64_t wanted_columns = std::max(widest_budget, extent) - 1;

  // Pass 1: rank every query's candidates; sum the call's curve when the floor or the
  // curve needs it.
  std::vector<RankedChunk> chunks;
  std::vector<double> local_queries(sequences, 0.0);
  at::Tensor curve_sums = at::zeros({std::max<int64_t>(extent, 1)}, q.options().dtype(at::kDouble));
  std::vector<at::Tensor> sequence_means(sequences);
  for (const MobaQueryRun& run : runs) {
    const SequenceSpan& span = spans[run.sequence];
    if (run.count == 0) continue;
    TORCH_CHECK(run.row >= 0 && run.row + run.count <= tq && run.position >= 0 && run.position + run.count <= span.keys,
                "moba token routing: a run of queries outside q or its sequence");
    at::Tensor& means = sequence_means[run.sequence];
    if (!means.defined()) means = key_means.narrow(0, span.first_block, span.blocks).index_select(1, kv_of_head);
    local_queries[run.sequence] += static_cast<double>(run.count);
    const int64_t columns = std::min(wanted_columns, span.blocks - 1);
    const int64_t per_chunk = std::max<int64_t>(1, kScoreElementsPerChunk / (q_heads * span.blocks));
    for (int64_t first = 0; first < run.count; first += per_chunk) {
      chunks.push_back(rank_chunk(q, means, span, run.row + first, run.position + first,
                                  std::min(per_chunk, run.count - first), columns, layout));
      chunks.back().sequence = run.sequence;
      if (extent > 0) curve_sums += chunk_curve_sums(chunks.back(), extent);
    }
  }

  MobaRouting routing;
  routing.gate = MobaGate::kToken;
  if (extent > 0) {
    const at::Tensor host = curve_sums.cpu();
    // [C sums for k = 1 .. extent, rows], over the heads (TP) and the queries (CP) of the call.
    std::vector<double> call_coverage(host.const_data_ptr<double>(), host.const_data_ptr<double>() + extent);
    double local_rows = 0.0;
    for (const double n : local_queries) local_rows += n;
    call_coverage.push_back(static_cast<double>(q_heads) * local_rows);
    if (params.sum_over_head_shards) params.sum_over_head_shards(call_coverage);
    if (sum_over_query_shards) sum_over_query_shards(call_coverage);
    const double call_rows = call_coverage.back();
    call_coverage.pop_back();
    for (double& c : call_coverage) c /= call_rows;
    if (params.coverage_floor_ratio > 0.0) {
      routing.k_floor =
          moba_coverage_floor_k(call_coverage, params.coverage_floor_ratio, params.coverage_reference_k);
    }
    if (params.coverage_curve_up_to > 0) {
      routing.coverage_curve.assign(call_coverage.begin(),
                                    call_coverage.begin() + std::min(extent, params.coverage_curve_up_to));
    }
  } else if (params.coverage_floor_ratio > 0.0) {
    routing.k_floor = 1;  // no query in the call: nothing to keep
  }
  routing.top_k = budgets;
  for (int64_t& kk : routing.top_k) kk = std::max(kk, routing.k_floor);

  // Pass 2: each query's selection with its sequence's effective budget.
  int64_t capacity = 1;
  for (const RankedChunk& chunk : chunks) {
    capacity = std::max(capacity, std::min(routing.top_k[chunk.sequence] - 1, chunk.most_candidates) + 1);
  }
  routing.selected = at::full({q_heads, tq, capacity}, -1, long_options.dtype(at::kInt));
  routing.selected_count = at::zeros({q_heads, tq}, long_options.dtype(at::kInt));
  at::Tensor sequence_sums = at::zeros({std::max<int64_t>(sequences, 1)}, q.options().dtype(at::kDouble));
  for (const RankedChunk& chunk : chunks) {
    const SequenceSpan& span = spans[chunk.sequence];
    const int64_t columns = chunk.order.size(-1);
    const at::Tensor taken = chunk.candidates.clamp_max(routing.top_k[chunk.sequence] - 1);  // [n]
    const at::Tensor kept = at::arange(columns, long_options).lt(taken.unsqueeze(1));       // [n, kc]
    const at::Tensor others = (chunk.order + span.first_block).masked_fill(kept.logical_not(), kNoBlock);
    const at::Tensor own = (chunk.diagonal + span.first_block).view({1, -1, 1}).expand({q_heads, chunk.count, 1});
    at::Tensor ids = std::get<0>(at::sort(at::cat({others, own}, -1), -1));  // ascending, kNoBlock last
    ids = ids.masked_fill(ids.eq(kNoBlock), -1).to(at::kInt);
    const int64_t width = std::min(columns + 1, capacity);
    routing.selected.narrow(1, chunk.query_start, chunk.count).narrow(2, 0, width).copy_(ids.narrow(-1, 0, width));
    routing.selected_count.narrow(1, chunk.query_start, chunk.count)
        .copy_((taken + 1).to(at::kInt).unsqueeze(0).expand({q_heads, chunk.count}));
    const at::Tensor rows = chunk.pi_diagonal + chunk.sorted_pi.masked_fill(kept.logical_not(), 0.0).sum(-1);
    sequence_sums[chunk.sequence] += rows.sum();
  }

  // C per sequence and over the call: [sums per sequence, queries per sequence], over the
  // ranks holding the call's queries (the heads stay this rank's, as under the block gate).
  const at::Tensor host = sequence_sums.cpu();
  std::vector<double> coverage(host.const_data_ptr<double>(), host.const_data_ptr<double>() + sequences);
  coverage.insert(coverage.end(), local_queries.begin(), local_queries.end());
  if (sum_over_query_shards) sum_over_query_shards(coverage);
  routing.coverage.assign(sequences, 1.0);
  double call_sum = 0.0, call_rows = 0.0;
  for (int64_t s = 0; s < sequences; ++s) {
    const double rows = static_cast<double>(q_heads) * coverage[sequences + s];
    if (rows == 0.0) continue;  // a sequence without queries in the call
    routing.coverage[s] = coverage[s] / rows;
    call_sum += coverage[s];
    call_rows += rows;
  }
  routing.coverage_mean = call_rows > 0 ? call_sum / call_rows : 1.0;
  return routing;
}

}  // namespace

MobaRouting moba_route_tokens(const at::Tensor& q, const at::Tensor& k, const BlockLayout& layout,
                              const MobaParams& params) {
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && q.size(2) == k.size(2) && q.size(1) % k.size(1) == 0,
              "moba_route_tokens: q [Tq, Hq, D] and k [Tk, Hkv, D] with Hq a multiple of Hkv expected");
  TORCH_CHECK(q.size(0) == layout.total_queries && k.size(0) == layout.total_keys,
              "moba_route_tokens: q and k do not hold the layout's tokens");
  std::vector<at::Tensor> means;
  std::vector<MobaQueryRun> runs;
  for (const SequenceSpan& span : sequence_spans(layout)) {
    means.push_back(span.blocks > 0 ? block_key_means(k, span, layout.block_size)
                                    : at::zeros({0, k.size(1), k.size(2)}, k.options().dtype(at::kDouble)));
    const int64_t sequence = static_cast<int64_t>(runs.size());
    runs.push_back({sequence, span.query_offset, span.keys - span.queries, span.queries});
  }
  const at::Tensor key_means =
      means.empty() ? at::zeros({0, k.size(1), k.size(2)}, k.options().dtype(at::kDouble)) : at::cat(means, 0);
  return route_runs(q, key_means, runs, layout, params, {});
}

MobaRouting moba_route_token_runs(const at::Tensor& q, const at::Tensor& key_means,
                                  const std::vector<MobaQueryRun>& runs, const BlockLayout& layout,
                                  const MobaParams& params,
                                  const std::function<void(std::vector<double>&)>& sum_over_query_shards) {
  TORCH_CHECK(q.dim() == 3 && key_means.dim() == 3 && key_means.size(2) == q.size(2) &&
                  key_means.scalar_type() == at::kDouble && key_means.device() == q.device(),
              "moba_route_token_runs: q [Tq, Hq, D] and float64 key means [NB, Hkv, D] on q's device expected");
  return route_runs(q, key_means, runs, layout, params, sum_over_query_shards);
}

}  // namespace sb
