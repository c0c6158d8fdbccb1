#include "harness/balance/dst_budget.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>

#include "harness/latency/microbatch_latency_curves.h"

namespace sb {
namespace {

// Micro-batches per block of the parallel search: enough work (about 12 latency lookups
// each) to outweigh handing a block to a thread.
constexpr int64_t kSearchBlock = 512;
// The most budgets located ahead of the search; others are located as asked for.
constexpr int64_t kTabledBudgets = 1024;

}  // namespace

int64_t DstBudget::floor_prior(int64_t k0, double p) {
  // A hair below the exact product keeps (1 - 0.1) * 10 = 9 from rounding up to 10.
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil((1.0 - p) * static_cast<double>(k0) - 1e-9)));
}

DstBudget::DstBudget(const BudgetOptions& options, const LatencyPredictor& predictor, BudgetEstimates estimates)
    : options_(options), predictor_(predictor), estimates_(estimates) {
  const DstOptions& d = options_.dst;
  if (d.k_min < 1 || d.k_min > d.k_max) throw std::invalid_argument("dst: need 1 <= k_min <= k_max");
  if (options_.axis == BudgetAxis::kKeyBlocks && (options_.top_k < d.k_min || options_.top_k > d.k_max)) {
    throw std::invalid_argument("dst: the default budget top_k = " + std::to_string(options_.top_k) +
                                " must lie in [k_min, k_max] = [" + std::to_string(d.k_min) + ", " +
                                std::to_string(d.k_max) + "]");
  }
  if (options_.axis == BudgetAxis::kKeptKeys && estimates_.reference == nullptr) {
    throw std::invalid_argument("dst: kept-keys budgets need the reference estimator");
  }
  if (!(d.p >= 0 && d.p <= 1)) throw std::invalid_argument("dst: p must be in [0, 1]");
  if (options_.block_size < 1) throw std::invalid_argument("dst: block_size must be >= 1");
}

int64_t DstBudget::reference_budget(int64_t longest) const {
  if (options_.axis == BudgetAxis::kKeyBlocks) return options_.top_k;
  return reference_budget_for_length(options_, *estimates_.reference, longest, true);
}

std::vector<int64_t> DstBudget::sequence_budgets(const std::vector<int64_t>& lengths, int64_t k) const {
  if (options_.axis == BudgetAxis::kKeyBlocks) return std::vector<int64_t>(lengths.size(), k);
  return kept_keys_budgets(options_, *estimates_.reference, lengths, k);
}

double DstBudget::budget_ms(const std::vector<int64_t>& lengths, int64_t k) const {
  return predictor_.microbatch_ms(lengths, sequence_budgets(lengths, k), options_.total_layers);
}

void DstBudget::assign(GlobalBatchPlan& plan, const std::vector<int64_t>& sample_lengths) {
  const DstOptions& d = options_.dst;

  // T(m, k0) for every micro-batch of the global batch.
  std::vector<PlannedMicroBatch*> all;
  std::vector<size_t> rank_of;  // the DP rank of all[m]
  std::vector<int64_t> longest;  // tokens of each micro-batch's longest sequence
  std::vector<int64_t> reference;  // k0(m)
  std::vector<double> at_k0;
  // Key blocks: one budget for every sequence, each micro-batch's latency over budgets
  // with its k-free terms computed once. Kept keys: each sequence at its own budget.
  const bool key_blocks = options_.axis == BudgetAxis::kKeyBlocks;
  std::optional<MicrobatchLatencyCurves> curves;  // key blocks only; budgets of the searched range located once
  if (key_blocks) {
    curves.emplace(predictor_, options_.total_layers, d.k_min, std::min(d.k_max, d.k_min + kTabledBudgets - 1));
  }
  std::vector<std::vector<int64_t>> lengths;  // kept keys only: [micro-batch][sequence]
  // T(m, k): the predicted latency of micro-batch m at budget k, as the rule compares it.
  const auto cost = [&](size_t m, int64_t k) { return curves ? curves->at(m, k) : budget_ms(lengths[m], k); };
  std::vector<const std::vector<int64_t>*> samples_of;  // key blocks: each micro-batch's samples
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    for (PlannedMicroBatch& mb : plan.ranks[r]) {
      all.push_back(&mb);
      rank_of.push_back(r);
      int64_t top = 0;
      for (int64_t s : mb.samples) top = std::max(top, sample_lengths.at(static_cast<size_t>(s)));
      longest.push_back(top);
      reference.push_back(reference_budget(top));
      if (curves) {
        samples_of.push_back(&mb.samples);
      } else {
        lengths.push_back(microbatch_lengths(mb, sample_lengths));
      }
    }
  }
  if (all.empty()) return;
  if (curves) curves->add_all(samples_of, sample_lengths);
  at_k0.resize(all.size());
  at::parallel_for(0, static_cast<int64_t>(all.size()), kSearchBlock, [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) at_k0[static_cast<size_t>(m)] = cost(static_cast<size_t>(m), reference[static_cast<size_t>(m)]);
  });
  double anchor = 0;
  switch (d.anchor) {
    case DstAnchor::kMean:
      anchor = std::accumulate(at_k0.begin(), at_k0.end(), 0.0) / static_cast<double>(at_k0.size());
      break;
    case DstAnchor::kMin:
      anchor = *std::min_element(at_k0.begin(), at_k0.end());
      break;
    case DstAnchor::kMax:
      anchor = *std::max_element(at_k0.begin(), at_k0.end());
      break;
  }
  last_anchor_ms_ = anchor;

  // The plan's prediction of micro-batch m at budget k: at the floor the layers are
  // expected to apply when that is above k (see dst_budget.h), a fractional floor
  // interpolated between the integers around it.
  const auto predicted = [&](size_t m, int64_t k) {
    if (estimates_.floor != nullptr) {
      const double expected_floor = estimates_.floor->expected_budget(longest[m]);
      if (expected_floor > static_cast<double>(k)) {
        const auto below = static_cast<int64_t>(std::floor(expected_floor));
        const double above_share = expected_floor - static_cast<double>(below);
        if (above_share <= 0) return cost(m, below);
        return (1.0 - above_share) * cost(m, below) + above_share * cost(m, below + 1);
      }
    }
    return cost(m, k);
  };

  // Rule dp_slack: the anchor rule's raise of each micro-batch below the anchor, applied
  // below; 0 for the others (bottlenecks keep their budget).
  std::vector<int64_t> raise_to(all.size(), 0);
  // Each micro-batch's search reads the anchor and writes only its own entries: the
  // micro-batches are searched on the intra-op threads, in blocks, with the same results
  // in any order.
  const auto search = [&](size_t m) {
    const int64_t k0 = reference[m];
    int64_t k = k0;
    if (at_k0[m] > anchor) {
      k = d.k_min;  // best effort when even k_min is predicted above the anchor
      if (d.bottleneck == DstBottleneckRule::kSmallest) {
        for (int64_t candidate = d.k_min; candidate <= k0; ++candidate) {
          if (cost(m, candidate) <= anchor) {
            k = candidate;
            break;
          }
        }
      } else {
        for (int64_t candidate = k0; candidate >= d.k_min; --candidate) {
          if (cost(m, candidate) <= anchor) {
            k = candidate;
            break;
          }
        }
      }
    } else if (at_k0[m] < anchor && d.raise != DstRaiseRule::kNone) {
      const int64_t ceiling = std::min(d.k_max, std::max(k0, saturating_budget(options_, longest[m])));
      for (int64_t candidate = ceiling; candidate > k0; --candidate) {
        if (cost(m, candidate) <= anchor) {
          if (d.raise == DstRaiseRule::kAnchor) {
            k = candidate;
          } else {
            raise_to[m] = candidate;
          }
          break;
        }
      }
    }
    all[m]->budget = k;
    if (options_.axis == BudgetAxis::kKeptKeys) all[m]->sequence_budgets = sequence_budgets(lengths[m], k);
    all[m]->coverage_floor_ratio = 1.0 - d.p;
    all[m]->coverage_reference_k = k0;
    all[m]->predicted_ms = predicted(m, k);
  };
  at::parallel_for(0, static_cast<int64_t>(all.size()), kSearchBlock, [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) search(static_cast<size_t>(m));
  });
  if (d.raise != DstRaiseRule::kDpSlack) return;

  // dp_slack: a rank's micro-batches run one after another and the ranks meet at the
  // gradient all-reduce, so raising a budget is free only while the rank's predicted total
  // stays within the slowest rank's. Each rank spends its slack on its raisable
  // micro-batches in plan order, each taking the largest budget up to the anchor rule's
  // whose extra predicted time still fits.
  std::vector<double> rank_total(plan.ranks.size(), 0.0);
  for (size_t m = 0; m < all.size(); ++m) rank_total[rank_of[m]] += all[m]->predicted_ms;
  const double slowest = *std::max_element(rank_total.begin(), rank_total.end());
  for (size_t m = 0; m < all.size(); ++m) {
    double& total = rank_total[rank_of[m]];
    for (int64_t k = raise_to[m]; k > all[m]->budget; --k) {
      const double raised = predicted(m, k);
      if (total - all[m]->predicted_ms + raised <= slowest) {
        total += raised - all[m]->predicted_ms;
        all[m]->budget = k;
        if (options_.axis == BudgetAxis::kKeptKeys) all[m]->sequence_budgets = sequence_budgets(lengths[m], k);
        all[m]->predicted_ms = raised;
        break;
      }
    }
  }
}

}  // namespace sb
