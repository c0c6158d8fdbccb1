// The MoBA gate on the host: block means, gate scores, top-k with the tie rule,
// coverage and the DST floor. Everything in float64; rows (head, query block) are
// processed in parallel and reduced in a fixed order, so results do not depend on
// the thread count.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "kernels/attention/patterns/moba/moba_attention.h"

namespace sb {
namespace {

// x [T, H, D] -> [H, NB, D] float64: the mean of each block's key tokens, or of its
// query tokens present in the call (zeros for a block without them). Reads x in its own
// dtype and sums in float64 (no float64 copy of x).
template <typename scalar_t>
void moba_block_means_typed(const at::Tensor& x, const BlockLayout& layout, bool of_queries,
                            at::Tensor& means) {
  const int64_t heads = x.size(1), dim = x.size(2), blocks = layout.num_blocks();
  const scalar_t* src = x.const_data_ptr<scalar_t>();
  double* dst = means.mutable_data_ptr<double>();
  const int64_t grain = moba_parallel_grain(layout.block_size * heads * dim);
  at::parallel_for(0, blocks, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const LayoutBlock& block = layout.blocks[b];
      const int64_t start = of_queries ? block.query_start : block.key_start;
      const int64_t len = of_queries ? block.query_len : block.key_len;
      if (len == 0) continue;
      for (int64_t h = 0; h < heads; ++h) {
        double* mean = dst + (h * blocks + b) * dim;
        for (int64_t t = start; t < start + len; ++t) {
          const scalar_t* row = src + (t * heads + h) * dim;
          for (int64_t d = 0; d < dim; ++d) mean[d] += static_cast<double>(row[d]);
        }
        for (int64_t d = 0; d < dim; ++d) mean[d] /= static_cast<double>(len);
      }
    }
  });
}

at::Tensor moba_block_means(const at::Tensor& x, const BlockLayout& layout, bool of_queries) {
  const at::Tensor contiguous = x.contiguous();
  at::Tensor means = at::zeros({x.size(1), layout.num_blocks(), x.size(2)}, at::kDouble);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "moba_block_means",
                                  [&] { moba_block_means_typed<scalar_t>(contiguous, layout, of_queries, means); });
  return means;
}

// One routing row (query head, query block): the earlier candidates sorted by the
// tie rule, with their softmax weights, and the diagonal's weight.
struct RoutingRow {
  int64_t head = 0, block = 0;
  int64_t candidates = 0;  // eligible blocks other than the diagonal
  int64_t offset = 0;      // into the ragged sorted arrays
  double pi_diagonal = 0.0;
};

}  // namespace

int64_t moba_parallel_grain(int64_t work_per_item) {
  constexpr int64_t kMinParallelWork = int64_t{1} << 18;
  return std::max<int64_t>(1, kMinParallelWork / std::max<int64_t>(1, work_per_item));
}

std::vector<int64_t> moba_budgets_per_sequence(const MobaParams& params, int64_t num_sequences) {
  if (params.top_k.empty() ||
      (params.top_k.size() != 1 && static_cast<int64_t>(params.top_k.size()) != num_sequences)) {
    throw std::invalid_argument("MoBA: top_k holds " + std::to_string(params.top_k.size()) +
                                " budgets for " + std::to_string(num_sequences) +
                                " sequences (give one per sequence, or one for all)");
  }
  std::vector<int64_t> budgets(num_sequences, params.top_k.front());
  if (params.top_k.size() != 1) budgets = params.top_k;
  for (size_t s = 0; s < budgets.size(); ++s) {
    if (budgets[s] < 1) {
      throw std::invalid_argument("MoBA: top_k of sequence " + std::to_string(s) + " is " +
                                  std::to_string(budgets[s]) +
                                  "; the budget counts the diagonal block, so it must be >= 1");
    }
  }
  const double ratio = params.coverage_floor_ratio;
  if (!(ratio >= 0.0 && ratio <= 1.0)) {
    throw std::invalid_argument("MoBA: coverage_floor_ratio must be in [0, 1] (1 - p), got " +
                                std::to_string(ratio));
  }
  if (ratio > 0.0 && params.coverage_reference_k < 1) {
    throw std::invalid_argument(
        "MoBA: coverage_floor_ratio > 0 needs coverage_reference_k >= 1 (the budget k0 whose "
        "coverage the floor refers to), got " +
        std::to_string(params.coverage_reference_k));
  }
  if (params.coverage_curve_up_to < 0) {
    throw std::invalid_argument("MoBA: coverage_curve_up_to must be >= 0 (0: no curve), got " +
                                std::to_string(params.coverage_curve_up_to));
  }
  return budgets;
}

int64_t moba_coverage_floor_k(const std::vector<double>& call_coverage, double ratio,
                              int64_t reference_k) {
  if (call_coverage.empty()) return 1;  // no query block in the call: nothing to keep
  const int64_t reference =
      std::min<int64_t>(std::max<int64_t>(reference_k, 1), call_coverage.size());
  const double target = ratio * call_coverage[reference - 1];
  for (int64_t k = 1; k <= reference; ++k) {
    if (call_coverage[k - 1] >= target) return k;
  }
  return reference;  // unreachable for ratio <= 1: C(reference) >= ratio * C(reference)
}

int64_t moba_call_coverage_extent(const MobaParams& params, int64_t most_eligible) {
  int64_t up_to = params.coverage_curve_up_to;
  if (params.coverage_floor_ratio > 0.0) up_to = std::max(up_to, params.coverage_reference_k);
  return std::min(up_to, most_eligible);
}

MobaRouting moba_route_cpu(const at::Tensor& q, const at::Tensor& k, const BlockLayout& layout,
                           const MobaParams& params) {
  return moba_route_from_means(moba_block_means(q, layout, /*of_queries=*/true),
                               moba_block_means(k, layout, /*of_queries=*/false), layout, params);
}

MobaRouting moba_route_from_means(const at::Tensor& query_means, const at::Tensor& key_means,
                                  const BlockLayout& layout, const MobaParams& params) {
  TORCH_CHECK(query_means.scalar_type() == at::kDouble && key_means.scalar_type() == at::kDouble &&
                  query_means.dim() == 3 && key_means.dim() == 3 &&
                  query_means.size(1) == layout.num_blocks() && key_means.size(1) == layout.num_blocks() &&
                  query_means.size(2) == key_means.size(2) && query_means.is_contiguous() &&
                  key_means.is_contiguous() && query_means.size(0) % key_means.size(0) == 0,
              "moba_route_from_means: contiguous float64 [Hq, NB, D] and [Hkv, NB, D] expected");
  const int64_t q_heads = query_means.size(0), kv_heads = key_means.size(0), dim = query_means.size(2);
  const int64_t group = q_heads / kv_heads;
  const int64_t blocks = layout.num_blocks();
  const std::vector<int64_t> budgets = moba_budgets_per_sequence(params, layout.num_sequences());

  const double* qbar = query_means.const_data_ptr<double>();
  const double* kbar = key_means.const_data_ptr<double>();

  std::vector<RoutingRow> rows;
  int64_t total_candidates = 0;
  for (int64_t h = 0; h < q_heads; ++h) {
    for (int64_t b = 0; b < blocks; ++b) {
      if (layout.blocks[b].query_len == 0) continue;
      RoutingRow row;
      row.head = h;
      row.block = b;
      row.candidates = layout.eligible_end(b) - layout.eligible_first(b) - 1;
      row.offset = total_candidates;
      total_candidates += row.candidates;
      rows.push_back(row);
    }
  }
  std::vector<int64_t> sorted_block(total_candidates);  // per row: candidates, best first
  std::vector<double> sorted_pi(total_candidates);      // their softmax weights

  const int64_t grain = moba_parallel_grain(layout.max_blocks_per_sequence * (dim + 16));
  at::parallel_for(0, static_cast<int64_t>(rows.size()), grain, [&](int64_t r0, int64_t r1) {
    std::vector<double> score;
    for (int64_t r = r0; r < r1; ++r) {
      RoutingRow& row = rows[r];
      const int64_t first = layout.eligible_first(row.block);
      const int64_t end = layout.eligible_end(row.block);
      const double* qm = qbar + (row.head * blocks + row.block) * dim;
      score.assign(end - first, 0.0);
      double max_score = -std::numeric_limits<double>::infinity();
      for (int64_t j = first; j < end; ++j) {
        const double* km = kbar + ((row.head / group) * blocks + j) * dim;
        double dot = 0.0;
        for (int64_t d = 0; d < dim; ++d) dot += qm[d] * km[d];
        score[j - first] = dot;
        max_score = std::max(max_score, dot);
      }
      double denominator = 0.0;
      for (double s : score) denominator += std::exp(s - max_score);
      row.pi_diagonal = std::exp(score[row.block - first] - max_score) / denominator;

      int64_t* ids = sorted_block.data() + row.offset;
      int64_t n = 0;
      for (int64_t j = first; j < end; ++j) {
        if (j != row.block) ids[n++] = j;
      }
      // The tie rule: higher score first; equal scores -> the lower block index.
      std::sort(ids, ids + n, [&](int64_t a, int64_t b) {
        const double sa = score[a - first], sb = score[b - first];
        return sa > sb || (sa == sb && a < b);
      });
      for (int64_t m = 0; m < n; ++m) {
        sorted_pi[row.offset + m] = std::exp(score[ids[m] - first] - max_score) / denominator;
      }
    }
  });

  MobaRouting routing;
  // C(k) of the whole call with one k for every sequence, k = 1 .. extent: the floor's
  // input and the evaluation's curve.
  int64_t most_eligible = 0;
  for (const RoutingRow& row : rows) most_eligible = std::max(most_eligible, row.candidates + 1);
  const int64_t extent = moba_call_coverage_extent(params, most_eligible);
  std::vector<double> call_coverage(extent, 0.0);
  for (const RoutingRow& row : rows) {
    double c = row.pi_diagonal;
    for (int64_t kk = 1; kk <= extent; ++kk) {
      if (kk >= 2 && kk - 2 < row.candidates) c += sorted_pi[row.offset + kk - 2];
      call_coverage[kk - 1] += c;
    }
  }
  double call_rows = static_cast<double>(rows.size());
  if (params.sum_over_head_shards && extent > 0) {
    // [C sums for k = 1 .. extent, rows]: every TP rank has the same extent (the same
    // sequences) and adds its heads' rows.
    std::vector<double> shared = call_coverage;
    shared.push_back(call_rows);
    params.sum_over_head_shards(shared);
    call_rows = shared.back();
    shared.pop_back();
    call_coverage = std::move(shared);
  }
  for (double& c : call_coverage) c /= call_rows;
  if (params.coverage_floor_ratio > 0.0) {
    routing.k_floor = moba_coverage_floor_k(call_coverage, params.coverage_floor_ratio,
                                            params.coverage_reference_k);
  }
  if (params.coverage_curve_up_to > 0) {
    routing.coverage_curve.assign(call_coverage.begin(),
                                  call_coverage.begin() + std::min(extent, params.coverage_curve_up_to));
  }
  routing.top_k = budgets;
  for (int64_t& kk : routing.top_k) kk = std::max(kk, routing.k_floor);

  // Selection per row: the diagonal and the first (k - 1) candidates.
  std::vector<int64_t> taken(rows.size());
  int64_t capacity = 1;
  for (size_t r = 0; r < rows.size(); ++r) {
    const int64_t budget = routing.top_k[layout.blocks[rows[r].block].sequence];
    taken[r] = std::min(budget - 1, rows[r].candidates);
    capacity = std::max(capacity, taken[r] + 1);
  }
  routing.selected = at::full({q_heads, blocks, capacity}, -1, at::kInt);
  routing.selected_count = at::zeros({q_heads, blocks}, at::kInt);
  int32_t* selected = routing.selected.mutable_data_ptr<int32_t>();
  int32_t* count = routing.selected_count.mutable_data_ptr<int32_t>();
  std::vector<double> sequence_sum(layout.num_sequences(), 0.0);
  std::vector<int64_t> sequence_rows(layout.num_sequences(), 0);
  double call_sum = 0.0;
  for (size_t r = 0; r < rows.size(); ++r) {
    const RoutingRow& row = rows[r];
    int32_t* out = selected + (row.head * blocks + row.block) * capacity;
    double c = row.pi_diagonal;
    for (int64_t m = 0; m < taken[r]; ++m) {
      out[m] = static_cast<int32_t>(sorted_block[row.offset + m]);
      c += sorted_pi[row.offset + m];
    }
    out[taken[r]] = static_cast<int32_t>(row.block);
    std::sort(out, out + taken[r] + 1);
    count[row.head * blocks + row.block] = static_cast<int32_t>(taken[r] + 1);
    const int64_t s = layout.blocks[row.block].sequence;
    sequence_sum[s] += c;
    sequence_rows[s] += 1;
    call_sum += c;
  }
  routing.coverage.resize(layout.num_sequences());
  for (int64_t s = 0; s < layout.num_sequences(); ++s) {
    routing.coverage[s] =
        sequence_rows[s] > 0 ? sequence_sum[s] / static_cast<double>(sequence_rows[s]) : 1.0;
  }
  routing.coverage_mean = rows.empty() ? 1.0 : call_sum / static_cast<double>(rows.size());
  return routing;
}

}  // namespace sb
