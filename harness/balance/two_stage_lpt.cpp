#include "harness/balance/two_stage_lpt.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <stdexcept>

#include "harness/balance/lpt.h"

namespace sb {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// DP ranks per task on the intra-op threads.
constexpr int64_t kRanksPerTask = 64;

}  // namespace

GlobalBatchPlan plan_two_stage_lpt(const BatchingInput& input, const std::vector<double>& sample_costs) {
  check_batching_input(input);
  if (sample_costs.size() != input.sample_lengths.size()) {
    throw std::invalid_argument("plan_two_stage_lpt: one cost per sample needed");
  }
  const std::vector<int64_t> rank_of = lpt_assign(sample_costs, input.dp);
  // Each rank's members, global positions in data order, in one pass over the samples.
  std::vector<std::vector<int64_t>> members_of(static_cast<size_t>(input.dp));
  for (size_t i = 0; i < rank_of.size(); ++i) members_of[static_cast<size_t>(rank_of[i])].push_back(static_cast<int64_t>(i));
  GlobalBatchPlan plan;
  plan.ranks.resize(static_cast<size_t>(input.dp));
  // Each rank is packed on its own: the ranks are split over the intra-op threads, each
  // writing only its own plan entries, so any split gives the same plan.
  at::parallel_for(0, input.dp, kRanksPerTask, [&](int64_t begin, int64_t end) {
    std::vector<double> costs;  // one rank's members', reused rank after rank
    std::vector<int64_t> sizes;
    for (int64_t r = begin; r < end; ++r) {
      const std::vector<int64_t>& members = members_of[static_cast<size_t>(r)];
      if (members.empty()) continue;
      costs.clear();
      sizes.clear();
      int64_t tokens = 0;
      for (int64_t i : members) {
        costs.push_back(sample_costs[static_cast<size_t>(i)]);
        sizes.push_back(input.sample_lengths[static_cast<size_t>(i)]);
        tokens += input.sample_lengths[static_cast<size_t>(i)];
      }
      int64_t min_bins = ceil_div(tokens, input.max_tokens);
      if (input.max_samples > 0) {
        min_bins = std::max(min_bins, ceil_div(static_cast<int64_t>(members.size()), input.max_samples));
      }
      const std::vector<std::vector<int64_t>> bins =
          lpt_pack(costs, sizes, input.max_tokens, input.max_samples, min_bins);
      std::vector<PlannedMicroBatch>& rank = plan.ranks[static_cast<size_t>(r)];
      rank.reserve(bins.size());
      for (const auto& bin : bins) {
        PlannedMicroBatch mb;
        mb.samples.reserve(bin.size());
        for (int64_t local : bin) {
          const int64_t global = members[static_cast<size_t>(local)];
          mb.samples.push_back(global);
          mb.tokens += input.sample_lengths[static_cast<size_t>(global)];
        }
        rank.push_back(std::move(mb));
      }
    }
  });
  return plan;
}

}  // namespace sb
