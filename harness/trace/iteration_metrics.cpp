#include "harness/trace/iteration_metrics.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace sb {

double max_over_mean(const std::vector<double>& values) {
  if (values.empty()) return 1.0;
  const double mean =
      std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  if (mean <= 0) return 1.0;
  return *std::max_element(values.begin(), values.end()) / mean;
}

double iteration_ms(const std::vector<RankTimeline>& ranks) {
  double longest = 0;
  for (const RankTimeline& r : ranks) longest = std::max(longest, r.end_ms - r.start_ms);
  return longest;
}

double compute_busy_ms(const RankTimeline& rank) {
  double busy = 0;
  for (const TimelineEvent& e : rank.events) {
    if (e.kind == EventKind::kForward || e.kind == EventKind::kBackward) busy += e.duration_ms();
  }
  return busy;
}

void derive_bubbles(const std::vector<double>& busy_ms, double iter_ms, PipelineMetrics& m) {
  m.iter_ms = iter_ms;
  m.busy_ms = busy_ms;
  m.idle_ms.clear();
  double sum = 0, largest = 0;
  for (double busy : busy_ms) {
    const double idle = std::max(0.0, iter_ms - busy);
    m.idle_ms.push_back(idle);
    const double fraction = iter_ms > 0 ? idle / iter_ms : 0.0;
    sum += fraction;
    largest = std::max(largest, fraction);
  }
  m.bubble_fraction = busy_ms.empty() ? 0.0 : sum / static_cast<double>(busy_ms.size());
  m.bubble_fraction_max = largest;
}

PipelineMetrics compute_pipeline_metrics(const std::vector<RankTimeline>& ranks, int64_t dp, int64_t pp,
                                         const std::vector<int64_t>& microbatches_per_dp_rank) {
  if (static_cast<int64_t>(ranks.size()) != dp * pp ||
      static_cast<int64_t>(microbatches_per_dp_rank.size()) != dp) {
    throw std::invalid_argument("pipeline metrics: " + std::to_string(ranks.size()) +
                                " timelines for dp " + std::to_string(dp) + " x pp " + std::to_string(pp));
  }
  PipelineMetrics m;
  std::vector<double> busy;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankTimeline& t = ranks[r];
    if (t.dp_rank * pp + t.stage != static_cast<int64_t>(r)) {
      throw std::invalid_argument("pipeline metrics: timeline " + std::to_string(r) + " is not dp rank " +
                                  std::to_string(static_cast<int64_t>(r) / pp) + ", stage " +
                                  std::to_string(static_cast<int64_t>(r) % pp));
    }
    busy.push_back(compute_busy_ms(t));
  }
  derive_bubbles(busy, iteration_ms(ranks), m);

  for (int64_t d = 0; d < dp; ++d) {
    const int64_t count = microbatches_per_dp_rank[static_cast<size_t>(d)];
    std::vector<double> latency(static_cast<size_t>(count), 0.0);
    std::vector<int> forwards(static_cast<size_t>(count * pp), 0), backwards(forwards.size(), 0);
    for (int64_t s = 0; s < pp; ++s) {
      for (const TimelineEvent& e : ranks[static_cast<size_t>(d * pp + s)].events) {
        if (e.kind != EventKind::kForward && e.kind != EventKind::kBackward) continue;
        if (e.microbatch < 0 || e.microbatch >= count) {
          throw std::invalid_argument("pipeline metrics: rank " + std::to_string(d * pp + s) +
                                      " timed micro-batch " + std::to_string(e.microbatch) + " of " +
                                      std::to_string(count));
        }
        latency[static_cast<size_t>(e.microbatch)] += e.duration_ms();
        auto& seen = e.kind == EventKind::kForward ? forwards : backwards;
        ++seen[static_cast<size_t>(s * count + e.microbatch)];
      }
    }
    for (size_t i = 0; i < forwards.size(); ++i) {
      if (forwards[i] != 1 || backwards[i] != 1) {
        throw std::invalid_argument("pipeline metrics: dp rank " + std::to_string(d) + " stage " +
                                    std::to_string(static_cast<int64_t>(i) / std::max<int64_t>(count, 1)) +
                                    " lacks one forward and one backward of every micro-batch");
      }
    }
    for (double ms : latency) {
      m.microbatch_ms.push_back(ms);
      m.microbatch_dp_rank.push_back(d);
    }
  }
  m.imbalance = max_over_mean(m.microbatch_ms);
  const RankImbalance between = rank_imbalance(m.microbatch_ms, m.microbatch_dp_rank);
  m.dp_imbalance = between.dp;
  m.slot_imbalance = between.slot;
  return m;
}

RankImbalance rank_imbalance(const std::vector<double>& microbatch_ms, const std::vector<int64_t>& microbatch_dp_rank) {
  if (microbatch_ms.size() != microbatch_dp_rank.size()) {
    throw std::invalid_argument("rank_imbalance: " + std::to_string(microbatch_ms.size()) + " latencies but " +
                                std::to_string(microbatch_dp_rank.size()) + " DP ranks");
  }
  std::vector<std::vector<double>> per_rank;  // [d]: d's micro-batches in order
  for (size_t k = 0; k < microbatch_ms.size(); ++k) {
    const int64_t d = microbatch_dp_rank[k];
    if (d < 0) throw std::invalid_argument("rank_imbalance: negative DP rank");
    if (per_rank.size() <= static_cast<size_t>(d)) per_rank.resize(static_cast<size_t>(d) + 1);
    per_rank[static_cast<size_t>(d)].push_back(microbatch_ms[k]);
  }
  RankImbalance out;
  if (per_rank.size() < 2) return out;
  std::vector<double> sums;
  size_t slots = per_rank.front().size();
  for (const auto& mbs : per_rank) {
    sums.push_back(std::accumulate(mbs.begin(), mbs.end(), 0.0));
    slots = std::min(slots, mbs.size());
  }
  out.dp = max_over_mean(sums);
  if (slots == 0) return out;
  double total = 0;
  for (size_t j = 0; j < slots; ++j) {
    std::vector<double> slot;
    for (const auto& mbs : per_rank) slot.push_back(mbs[j]);
    total += max_over_mean(slot);
  }
  out.slot = total / static_cast<double>(slots);
  return out;
}

}  // namespace sb
