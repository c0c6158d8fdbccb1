#include "kernels/attention/patterns/vertical_slash/vertical_slash_budget.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "kernels/attention/patterns/vertical_slash/vertical_slash_blocks.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index_on_device.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_sharded_budget.h"

namespace sb {

void vertical_slash_check_budget_request(const VerticalSlashBudgetRequest& request, int64_t num_sequences) {
  if (!request.kept_keys.empty() && static_cast<int64_t>(request.kept_keys.size()) != num_sequences) {
    throw std::invalid_argument("vertical-slash budget request: " + std::to_string(request.kept_keys.size()) +
                                " budgets for a micro-batch of " + std::to_string(num_sequences) +
                                " sequences; give one kept-keys-per-query budget per sequence (or none)");
  }
  for (const int64_t keys : request.kept_keys) {
    if (keys < 0) {
      throw std::invalid_argument("vertical-slash budget request: kept keys per query must be >= 0 (0: the "
                                  "params' own rule), got " + std::to_string(keys));
    }
  }
  if (!(request.coverage_floor_ratio >= 0.0 && request.coverage_floor_ratio <= 1.0)) {
    throw std::invalid_argument("vertical-slash budget request: coverage_floor_ratio must be in [0, 1], got " +
                                std::to_string(request.coverage_floor_ratio));
  }
}

namespace {

// What the search needs of one query head's attention, on the host: its vertical and slash
// scores and its query block columns ([blocks, L] float64 contiguous:
// vertical_slash_query_block_columns), from which every coverage is summed.
struct HeadSummary {
  VerticalSlashScores scores;
  at::Tensor block_columns;
};

// Runs body(h, summary) for every query head h of the sequence `inputs` holds, in
// parallel over heads. On a GPU (batched) this thread computes the heads' attention, its
// sums and block columns on the device in batches and copies only those to the host
// (2 + blocks rows of L per head, not n), so no device work runs on the worker threads;
// on the CPU each worker computes its own heads'. (Here, in an OpenMP-compiled unit:
// at::parallel_for is parallel only where _OPENMP is defined.)
template <class Body>
void for_each_head_summary(const VerticalSlashSequenceInputs& inputs, int64_t q_heads, double scale, int64_t block,
                           bool batched, Body body) {
  if (!batched) {
    at::parallel_for(0, q_heads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t h = begin; h < end; ++h) {
        const at::Tensor attention = inputs.attention(h, scale);
        body(h, HeadSummary{vertical_slash_scores(attention, inputs.length),
                            vertical_slash_query_block_columns(attention.unsqueeze(0), inputs.length, inputs.n, block)[0]
                                .contiguous()});
      }
    });
    return;
  }
  const int64_t batch = vertical_slash_heads_per_batch(inputs, q_heads);
  for (int64_t first = 0; first < q_heads; first += batch) {
    const int64_t heads = std::min(batch, q_heads - first);
    const VerticalSlashHeadsAttention attention(inputs, first, heads, scale);
    std::vector<VerticalSlashScores> scores = attention.scores();
    const at::Tensor columns =
        vertical_slash_query_block_columns(attention.attention(), inputs.length, inputs.n, block).to(at::kCPU);
    at::parallel_for(0, heads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t h = begin; h < end; ++h) {
        body(first + h, HeadSummary{std::move(scores[static_cast<size_t>(h)]), columns[h].contiguous()});
      }
    });
  }
}

// A head's coverage of `lists` from its block columns.
double summary_coverage(const VerticalSlashHeadIndex& lists, const at::Tensor& block_columns, int64_t length, int64_t n) {
  return vertical_slash_block_columns_kept_mass(lists, block_columns.const_data_ptr<double>(), length, n) /
         static_cast<double>(n);
}

// Appends the masses in (0, total) at which one of the head's lists takes its next candidate.
void add_breakpoints(const VerticalSlashLadders& ladders, double total, std::vector<double>& thresholds) {
  for (const VerticalSlashLadder* list : {&ladders.vertical, &ladders.slash}) {
    for (const double mass : list->mass_before) {
      if (mass > 0.0 && mass < total) thresholds.push_back(mass);
    }
  }
}

// 0, the breakpoints, total (= n, level 1): ascending, distinct. Between two neighbours the
// lists are the upper one's, so these thresholds reach every list a level in [0, 1] gives.
std::vector<double> level_thresholds(std::vector<double> breakpoints, double total) {
  breakpoints.push_back(0.0);
  breakpoints.push_back(total);
  std::sort(breakpoints.begin(), breakpoints.end());
  breakpoints.erase(std::unique(breakpoints.begin(), breakpoints.end()), breakpoints.end());
  return breakpoints;
}

// How many of the indices 0 .. size - 1 `holds` is true for, given that it holds on a
// prefix (binary search: about log2(size) calls).
template <typename Predicate>
int64_t leading_count(int64_t size, const Predicate& holds) {
  int64_t lo = 0, hi = size;  // holds on [0, lo), fails on [hi, size)
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (holds(mid)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// What the first pass keeps of one head: its ladders, its reference and its floor, and
// its block columns for the budgeted lists' coverage.
struct HeadSearch {
  std::optional<VerticalSlashLadders> ladders;
  at::Tensor block_columns;
  VerticalSlashHeadIndex reference;
  int64_t reference_pairs = 0;
  double floor_threshold = 0.0;  // lambda_f,h x n
  VerticalSlashHeadIndex floored;  // the lists at the floor level, with their coverage
  int64_t floor_pairs = 0;
};

// The first pass over one head: the reference (the params' rule, as vertical_slash_index
// chooses it) and, with a floor, the smallest level over the head's breakpoints whose
// coverage reaches ratio x the reference's.
HeadSearch search_head(HeadSummary summary, int64_t length, int64_t n, const VerticalSlashParams& params,
                       double floor_ratio) {
  HeadSearch head;
  head.ladders.emplace(summary.scores.vertical, summary.scores.slash, params);
  head.block_columns = std::move(summary.block_columns);
  const auto coverage = [&](const VerticalSlashHeadIndex& lists) {
    return summary_coverage(lists, head.block_columns, length, n);
  };
  head.reference = vertical_slash_select(*head.ladders, n, params);
  head.reference.coverage = coverage(head.reference);
  head.reference_pairs = vertical_slash_kept_pairs(head.reference, length);
  if (floor_ratio <= 0.0) return head;
  const std::vector<double> thresholds = vertical_slash_level_thresholds({&*head.ladders}, static_cast<double>(n));
  const double target = floor_ratio * head.reference.coverage;
  const auto size = static_cast<int64_t>(thresholds.size());
  const int64_t below = leading_count(size, [&](int64_t i) {
    return coverage(head.ladders->at(thresholds[static_cast<size_t>(i)])) < target;
  });
  head.floor_threshold = thresholds[static_cast<size_t>(std::min(below, size - 1))];  // none reaches: level 1
  head.floored = head.ladders->at(head.floor_threshold);
  head.floored.coverage = coverage(head.floored);
  head.floor_pairs = vertical_slash_kept_pairs(head.floored, length);
  return head;
}

std::vector<const VerticalSlashLadders*> ladders_of(const std::vector<HeadSearch>& heads) {
  std::vector<const VerticalSlashLadders*> ladders;
  for (const HeadSearch& head : heads) ladders.push_back(&*head.ladders);
  return ladders;
}

}  // namespace

int64_t vertical_slash_pairs_at(const std::vector<const VerticalSlashLadders*>& heads, double threshold,
                                int64_t length) {
  std::vector<int64_t> pairs(heads.size(), 0);
  at::parallel_for(0, static_cast<int64_t>(heads.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t h = begin; h < end; ++h) {
      pairs[static_cast<size_t>(h)] = vertical_slash_kept_pairs(heads[static_cast<size_t>(h)]->at(threshold), length);
    }
  });
  return std::accumulate(pairs.begin(), pairs.end(), int64_t{0});
}

std::vector<double> vertical_slash_level_thresholds(const std::vector<const VerticalSlashLadders*>& heads,
                                                    double total) {
  std::vector<double> breakpoints;
  for (const VerticalSlashLadders* ladders : heads) add_breakpoints(*ladders, total, breakpoints);
  return level_thresholds(std::move(breakpoints), total);
}

double vertical_slash_budget_threshold(const std::vector<const VerticalSlashLadders*>& heads, int64_t kept_keys,
                                       int64_t length, double total) {
  const std::vector<double> thresholds = vertical_slash_level_thresholds(heads, total);
  // No query keeps more than `length` keys: the cap changes nothing and cannot overflow.
  const int64_t limit = std::min(kept_keys, length) * length * static_cast<int64_t>(heads.size());
  const int64_t within = leading_count(static_cast<int64_t>(thresholds.size()), [&](int64_t i) {
    return vertical_slash_pairs_at(heads, thresholds[static_cast<size_t>(i)], length) <= limit;
  });
  return thresholds[static_cast<size_t>(std::max<int64_t>(within - 1, 0))];
}

int64_t vertical_slash_kept_keys_per_query(int64_t pairs, int64_t length, int64_t heads) {
  const double rows = static_cast<double>(length) * static_cast<double>(std::max<int64_t>(1, heads));
  return rows > 0 ? std::llround(static_cast<double>(pairs) / rows) : 0;
}

VerticalSlashBudgetedIndex vertical_slash_budgeted_index(const at::Tensor& q, const at::Tensor& k,
                                                         const PackedSequences& sequences,
                                                         const VerticalSlashParams& params, double scale,
                                                         const VerticalSlashBudgetRequest& request,
                                                         const std::function<void(std::vector<double>&)>& sum_over_head_shards) {
  params.validate();
  vertical_slash_check_inputs(q, k, sequences);
  vertical_slash_check_budget_request(request, sequences.num_sequences());
  const c10::NoGradGuard no_grad;
  const int64_t num_heads = q.size(1);
  const double floor_ratio = request.coverage_floor_ratio;
  // On a GPU each sequence's heads' attention is computed by this thread in batches and
  // summed there; the sums come to the host, where the searches run on the worker threads.
  const bool on_device = !q.device().is_cpu();
  VerticalSlashBudgetedIndex out;
  // First pass, per sequence: every head's ladders, reference and floor (one head's
  // attention at a time per thread); the budgeted sequences' heads are kept for the search.
  std::vector<std::vector<HeadSearch>> searched(static_cast<size_t>(sequences.num_sequences()));
  std::vector<VerticalSlashBudgetTarget> targets;
  std::vector<int64_t> target_sequence;
  for (int64_t s = 0; s < sequences.num_sequences(); ++s) {
    const int64_t length = sequences.length(s);
    const bool budgeted = !request.kept_keys.empty() && request.kept_keys[static_cast<size_t>(s)] > 0;
    out.level.push_back(std::nullopt);
    if (length == 0) {
      out.index.emplace_back(static_cast<size_t>(num_heads));
      out.reference_coverage.emplace_back(static_cast<size_t>(num_heads), 1.0);
      out.reference_kept_pairs.push_back(0);
      if (floor_ratio > 0.0) {
        out.floor_level.emplace_back(static_cast<size_t>(num_heads), 0.0);
        out.floor_kept_pairs.push_back(0);
      }
      continue;
    }
    const VerticalSlashSequenceInputs inputs(q, k, sequences, s, params.last_queries);
    const auto total = static_cast<double>(inputs.n);
    std::vector<HeadSearch>& heads = searched[static_cast<size_t>(s)];
    heads.resize(static_cast<size_t>(num_heads));
    for_each_head_summary(inputs, num_heads, scale, params.block_size, on_device, [&](int64_t h, HeadSummary summary) {
      heads[static_cast<size_t>(h)] = search_head(std::move(summary), length, inputs.n, params, floor_ratio);
    });
    std::vector<double> reference_coverage;
    int64_t reference_pairs = 0, floor_pairs = 0;
    std::vector<double> floor_level;
    for (const HeadSearch& head : heads) {
      reference_coverage.push_back(head.reference.coverage);
      reference_pairs += head.reference_pairs;
      floor_pairs += head.floor_pairs;
      floor_level.push_back(head.floor_threshold / total);
    }
    out.reference_coverage.push_back(std::move(reference_coverage));
    out.reference_kept_pairs.push_back(reference_pairs);
    if (floor_ratio > 0.0) {
      out.floor_level.push_back(std::move(floor_level));
      out.floor_kept_pairs.push_back(floor_pairs);
    }
    if (!budgeted) {  // the reference rule (it meets any floor r <= 1 by definition)
      std::vector<VerticalSlashHeadIndex> chosen(static_cast<size_t>(num_heads));
      for (size_t h = 0; h < heads.size(); ++h) chosen[h] = std::move(heads[h].reference);
      out.index.push_back(std::move(chosen));
      heads.clear();
      continue;
    }
    out.index.emplace_back();  // filled below
    targets.push_back({ladders_of(heads), request.kept_keys[static_cast<size_t>(s)], length, total});
    target_sequence.push_back(s);
  }

  // The budget levels: alone per sequence, or with the other head shards.
  const std::vector<double> thresholds = vertical_slash_budget_thresholds(targets, sum_over_head_shards);

  // Second pass: each budgeted head at max(lambda_b, lambda_f,h), its coverage from the
  // block columns the first pass kept.
  for (size_t j = 0; j < targets.size(); ++j) {
    const int64_t s = target_sequence[j];
    const double threshold = thresholds[j];
    const int64_t length = sequences.length(s);
    const int64_t n = std::min(params.last_queries, length);
    std::vector<HeadSearch>& heads = searched[static_cast<size_t>(s)];
    out.level[static_cast<size_t>(s)] = threshold / targets[j].total;
    std::vector<VerticalSlashHeadIndex> chosen(static_cast<size_t>(num_heads));
    at::parallel_for(0, num_heads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t h = begin; h < end; ++h) {
        HeadSearch& head = heads[static_cast<size_t>(h)];
        VerticalSlashHeadIndex& lists = chosen[static_cast<size_t>(h)];
        if (floor_ratio > 0.0 && head.floor_threshold >= threshold) {
          lists = std::move(head.floored);
        } else {
          lists = head.ladders->at(threshold);
          lists.coverage = summary_coverage(lists, head.block_columns, length, n);
        }
      }
    });
    out.index[static_cast<size_t>(s)] = std::move(chosen);
  }
  return out;
}

}  // namespace sb
