#include "harness/balance/batch_plan.h"

#include <stdexcept>
#include <string>

namespace sb {

int64_t GlobalBatchPlan::microbatch_count() const {
  int64_t count = 0;
  for (const auto& rank : ranks) count += static_cast<int64_t>(rank.size());
  return count;
}

void GlobalBatchPlan::validate(const std::vector<int64_t>& sample_lengths,
                               int64_t max_tokens) const {
  std::vector<int> seen(sample_lengths.size(), 0);
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (size_t m = 0; m < ranks[r].size(); ++m) {
      const PlannedMicroBatch& mb = ranks[r][m];
      const std::string where = "rank " + std::to_string(r) + " micro-batch " + std::to_string(m);
      if (mb.samples.empty()) throw std::logic_error("batch plan: " + where + " is empty");
      int64_t tokens = 0;
      for (int64_t s : mb.samples) {
        if (s < 0 || s >= static_cast<int64_t>(sample_lengths.size())) {
          throw std::logic_error("batch plan: " + where + " names sample " + std::to_string(s) +
                                 " outside the global batch");
        }
        if (++seen[static_cast<size_t>(s)] > 1) {
          throw std::logic_error("batch plan: sample " + std::to_string(s) + " planned twice");
        }
        tokens += sample_lengths[static_cast<size_t>(s)];
      }
      if (tokens != mb.tokens) {
        throw std::logic_error("batch plan: " + where + " says " + std::to_string(mb.tokens) +
                               " tokens, its samples hold " + std::to_string(tokens));
      }
      if (tokens > max_tokens) {
        throw std::logic_error("batch plan: " + where + " holds " + std::to_string(tokens) +
                               " tokens, over the capacity " + std::to_string(max_tokens));
      }
    }
  }
  for (size_t s = 0; s < seen.size(); ++s) {
    if (seen[s] == 0) throw std::logic_error("batch plan: sample " + std::to_string(s) + " is not planned");
  }
}

std::vector<int64_t> microbatch_lengths(const PlannedMicroBatch& mb,
                                        const std::vector<int64_t>& sample_lengths) {
  std::vector<int64_t> lengths;
  lengths.reserve(mb.samples.size());
  for (int64_t s : mb.samples) lengths.push_back(sample_lengths.at(static_cast<size_t>(s)));
  return lengths;
}

std::vector<std::vector<int64_t>> plan_microbatch_lengths(const GlobalBatchPlan& plan,
                                                          const std::vector<int64_t>& sample_lengths) {
  std::vector<std::vector<int64_t>> out;
  for (const auto& rank : plan.ranks) {
    for (const PlannedMicroBatch& mb : rank) out.push_back(microbatch_lengths(mb, sample_lengths));
  }
  return out;
}

}  // namespace sb
