#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_budget.h"

#include <algorithm>
#include <optional>

#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_sums.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_blocks.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_sharded_budget.h"

namespace sb {
namespace {

// One (sequence, query head) of the search: what every rank computes alike.
struct RingHeadSearch {
  int64_t sequence = 0, head = 0;
  std::optional<VerticalSlashLadders> ladders;
  VerticalSlashHeadIndex reference;
  std::vector<double> thresholds;  // the floor search's (this head's levels)
  int64_t lo = 0, hi = 0;          // the floor search: below target on [0, lo), not from hi
  double floor_threshold = 0.0;    // lambda_f,h x n
  VerticalSlashHeadIndex floored;  // the floor level's lists (during the search: the probe's)
  VerticalSlashHeadIndex budgeted;  // the budget level's lists, where it is above the floor
};

// Coverage of each search's `lists_of(search)`, one all-reduce for all (none when empty:
// every rank holds the same searches, so every rank skips it alike).
template <typename ListsOf>
void fill_coverage(VerticalSlashRingSums& sums, std::vector<RingHeadSearch*>& searches, const ListsOf& lists_of,
                   const char* what) {
  if (searches.empty()) return;
  std::vector<VerticalSlashRingSums::Item> items;
  for (RingHeadSearch* search : searches) items.push_back({search->sequence, search->head, &lists_of(*search)});
  const std::vector<double> coverage = sums.kept_coverage(items, what);
  for (size_t i = 0; i < searches.size(); ++i) lists_of(*searches[i]).coverage = coverage[i];
}

}  // namespace

VerticalSlashBudgetedIndex vertical_slash_ring_budgeted_index(const at::Tensor& q, const at::Tensor& k,
                                                              const RingGeometry& geometry,
                                                              const VerticalSlashParams& params, double scale,
                                                              const VerticalSlashBudgetRequest& request,
                                                              RingContext& context, int64_t call,
                                                              const std::function<void(std::vector<double>&)>& sum_over_head_shards) {
  vertical_slash_check_budget_request(request, geometry.sequences.num_sequences());
  VerticalSlashRingSums sums(q, k, geometry, params, scale, context, call);
  const auto& sequences = sums.sequences();
  const int64_t heads = q.size(1);
  const double floor_ratio = request.coverage_floor_ratio;

  // Ladders and references of every non-empty (sequence, head), their coverage.
  std::vector<std::vector<RingHeadSearch>> search(sequences.size());
  std::vector<RingHeadSearch*> all;
  for (size_t s = 0; s < sequences.size(); ++s) {
    if (sequences[s].length == 0) continue;
    search[s].resize(static_cast<size_t>(heads));
    for (int64_t h = 0; h < heads; ++h) {
      RingHeadSearch& head = search[s][static_cast<size_t>(h)];
      head.sequence = static_cast<int64_t>(s);
      head.head = h;
      head.ladders.emplace(sequences[s].vertical[static_cast<size_t>(h)], sequences[s].slash[static_cast<size_t>(h)],
                           params);
      head.reference = vertical_slash_select(*head.ladders, sequences[s].n, params);
      all.push_back(&head);
    }
  }
  fill_coverage(sums, all, [](RingHeadSearch& h) -> VerticalSlashHeadIndex& { return h.reference; },
                "vertical-slash's reference coverage");

  // The floor: every head's smallest level whose coverage reaches ratio x its reference's,
  // binary searches over the heads' own thresholds in lockstep (one all-reduce a step).
  if (floor_ratio > 0.0) {
    for (RingHeadSearch* head : all) {
      head->thresholds = vertical_slash_level_thresholds({&*head->ladders},
                                                         static_cast<double>(sequences[static_cast<size_t>(head->sequence)].n));
      head->lo = 0;
      head->hi = static_cast<int64_t>(head->thresholds.size());
    }
    while (true) {
      std::vector<RingHeadSearch*> probing;
      for (RingHeadSearch* head : all) {
        if (head->lo < head->hi) probing.push_back(head);
      }
      if (probing.empty()) break;
      for (RingHeadSearch* head : probing) {
        const int64_t mid = head->lo + (head->hi - head->lo) / 2;
        head->floored = head->ladders->at(head->thresholds[static_cast<size_t>(mid)]);
      }
      fill_coverage(sums, probing, [](RingHeadSearch& h) -> VerticalSlashHeadIndex& { return h.floored; },
                    "vertical-slash's floor search");
      for (RingHeadSearch* head : probing) {
        const int64_t mid = head->lo + (head->hi - head->lo) / 2;
        if (head->floored.coverage < floor_ratio * head->reference.coverage) {
          head->lo = mid + 1;
        } else {
          head->hi = mid;
        }
      }
    }
    for (RingHeadSearch* head : all) {
      const auto size = static_cast<int64_t>(head->thresholds.size());
      head->floor_threshold = head->thresholds[static_cast<size_t>(std::min(head->lo, size - 1))];  // none: level 1
      head->floored = head->ladders->at(head->floor_threshold);
    }
    fill_coverage(sums, all, [](RingHeadSearch& h) -> VerticalSlashHeadIndex& { return h.floored; },
                  "vertical-slash's floor coverage");
  }

  // The budget levels (pair counts only: no CP communication), then the lists each head runs.
  VerticalSlashBudgetedIndex out;
  std::vector<RingHeadSearch*> budgeted_heads;
  std::vector<std::vector<VerticalSlashHeadIndex>> chosen(sequences.size());
  std::vector<VerticalSlashBudgetTarget> targets;
  std::vector<size_t> target_sequence;
  for (size_t s = 0; s < sequences.size(); ++s) {
    const int64_t length = sequences[s].length;
    out.level.push_back(std::nullopt);
    chosen[s].resize(static_cast<size_t>(heads));
    if (length == 0) {
      out.reference_coverage.emplace_back(static_cast<size_t>(heads), 1.0);
      out.reference_kept_pairs.push_back(0);
      if (floor_ratio > 0.0) {
        out.floor_level.emplace_back(static_cast<size_t>(heads), 0.0);
        out.floor_kept_pairs.push_back(0);
      }
      continue;
    }
    const auto total = static_cast<double>(sequences[s].n);
    std::vector<double> reference_coverage, floor_level;
    int64_t reference_pairs = 0, floor_pairs = 0;
    std::vector<const VerticalSlashLadders*> ladders;
    for (RingHeadSearch& head : search[s]) {
      reference_coverage.push_back(head.reference.coverage);
      reference_pairs += vertical_slash_kept_pairs(head.reference, length);
      if (floor_ratio > 0.0) floor_pairs += vertical_slash_kept_pairs(head.floored, length);
      floor_level.push_back(head.floor_threshold / total);
      ladders.push_back(&*head.ladders);
    }
    out.reference_coverage.push_back(std::move(reference_coverage));
    out.reference_kept_pairs.push_back(reference_pairs);
    if (floor_ratio > 0.0) {
      out.floor_level.push_back(std::move(floor_level));
      out.floor_kept_pairs.push_back(floor_pairs);
    }
    const bool budgeted = !request.kept_keys.empty() && request.kept_keys[s] > 0;
    if (!budgeted) {  // the reference rule (it meets any floor r <= 1 by definition)
      for (size_t h = 0; h < chosen[s].size(); ++h) chosen[s][h] = search[s][h].reference;
      continue;
    }
    targets.push_back({std::move(ladders), request.kept_keys[s], length, total});
    target_sequence.push_back(s);
  }
  // Alone, or with the other head shards under TP (their sums: no CP communication).
  const std::vector<double> thresholds = vertical_slash_budget_thresholds(targets, sum_over_head_shards);
  for (size_t j = 0; j < targets.size(); ++j) {
    const size_t s = target_sequence[j];
    const double threshold = thresholds[j];
    out.level[s] = threshold / targets[j].total;
    for (size_t h = 0; h < chosen[s].size(); ++h) {
      RingHeadSearch& head = search[s][h];
      if (floor_ratio > 0.0 && head.floor_threshold >= threshold) {
        chosen[s][h] = head.floored;
      } else {
        head.budgeted = head.ladders->at(threshold);
        budgeted_heads.push_back(&head);
      }
    }
  }
  fill_coverage(sums, budgeted_heads, [](RingHeadSearch& h) -> VerticalSlashHeadIndex& { return h.budgeted; },
                "vertical-slash's budgeted coverage");
  for (RingHeadSearch* head : budgeted_heads) {
    chosen[static_cast<size_t>(head->sequence)][static_cast<size_t>(head->head)] = std::move(head->budgeted);
  }
  out.index = std::move(chosen);
  sums.record_event();
  return out;
}

}  // namespace sb
