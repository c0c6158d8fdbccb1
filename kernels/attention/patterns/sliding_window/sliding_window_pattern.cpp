#include "kernels/attention/patterns/sliding_window/sliding_window_pattern.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "kernels/attention/patterns/sliding_window/sliding_window_backend.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_coverage.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_reference.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_ring_selector.h"

namespace sb {

bool SlidingWindowPattern::same(const AttentionPattern& other) const {
  const auto* sw = dynamic_cast<const SlidingWindowPattern*>(&other);
  return sw != nullptr && sw->options_ == options_;
}

bool SlidingWindowPattern::same_selection(const AttentionPattern& other) const {
  const auto* sw = dynamic_cast<const SlidingWindowPattern*>(&other);
  return sw != nullptr && sw->options_.sink_tokens == options_.sink_tokens;
}

std::vector<int64_t> SlidingWindowPattern::profile_budgets(int64_t longest_sample, int64_t dst_k_max) const {
  const int64_t longest = std::max<int64_t>(1, longest_sample);
  std::vector<int64_t> budgets;
  for (int64_t w = std::min<int64_t>(64, longest); w < longest; w *= 2) budgets.push_back(w);
  budgets.push_back(longest);
  budgets.push_back(std::min(options_.window, longest));
  if (dst_k_max > 0) budgets.push_back(std::min(dst_k_max, longest));
  std::sort(budgets.begin(), budgets.end());
  budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
  return budgets;
}

std::unique_ptr<AttentionBackend> SlidingWindowPattern::make_backend() const {
  return std::make_unique<SlidingWindowAttention>(options_);
}

std::shared_ptr<RingPatternSelector> SlidingWindowPattern::make_ring_selector() const {
  return std::make_shared<SlidingWindowRingSelector>(options_);
}

std::optional<AttentionTrainingProblem> SlidingWindowPattern::training_problem(
    const AttentionTrainingSetting& setting) const {
  if (!setting.cuda || setting.cp <= 1) return std::nullopt;
  return AttentionTrainingProblem{
      "attention",
      "is sliding_window under context parallelism (cp " + std::to_string(setting.cp) +
          ") on GPUs, but the GPU ring's fused kernels mask whole blocks and the window ends inside one",
      "run it with cp 1 on GPUs, or on the CPU (train.device \"cpu\") with any cp"};
}

double SlidingWindowPattern::attended_pairs(int64_t length, int64_t budget) const {
  if (budget < 1) throw std::invalid_argument("attention_pairs: a window must be >= 1");
  return sliding_window_pairs(length, budget, options_.sink_tokens);
}

double SlidingWindowPattern::selection_forward_flops(int64_t length, int64_t q_heads, int64_t head_dim) const {
  return 2.0 * static_cast<double>(head_dim * q_heads) *
         static_cast<double>(std::min(kSlidingWindowCoverageQueries, length)) * static_cast<double>(length);
}

std::vector<SelectionAllreduces> SlidingWindowPattern::ring_selection_allreduces(
    const std::vector<int64_t>& lengths, bool /*budgeted*/, bool /*floor*/, int64_t query_heads, int64_t /*kv_heads*/,
    int64_t head_dim) const {
  const auto heads = static_cast<double>(query_heads);
  double last = 0, tokens = 0;
  for (int64_t length : lengths) {
    last += static_cast<double>(std::min(kSlidingWindowCoverageQueries, length));
    tokens += static_cast<double>(length);
  }
  return {{last * heads * static_cast<double>(head_dim) * 8.0, 1.0},  // the last queries
          {last * heads * 8.0, 2.0},                                   // score maxima, softmax denominators
          {(tokens + static_cast<double>(lengths.size())) * 8.0, 1.0}};  // kept mass by window, rows
}

double SlidingWindowPattern::kept_pairs(const at::Tensor& q, const at::Tensor& /*k*/, const PackedSequences& sequences,
                                        double /*scale*/) const {
  double pairs = 0;
  for (int64_t s = 0; s < sequences.num_sequences(); ++s) {
    pairs += sliding_window_pairs(sequences.length(s), options_.window, options_.sink_tokens);
  }
  return static_cast<double>(q.size(1)) * pairs;
}

at::Tensor SlidingWindowPattern::reference_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                const PackedSequences& /*sequences*/, double scale,
                                                int64_t first_row) const {
  return sliding_window_reference_rows(q, k, v, options_.window, options_.sink_tokens, scale, first_row);
}

std::function<void()> SlidingWindowPattern::selection_step(const at::Tensor& q, const at::Tensor& k,
                                                           const PackedSequences& sequences, double scale) const {
  const int64_t sinks = options_.sink_tokens;
  return [q, k, sequences, sinks, scale] { sliding_window_mass(q, k, sequences, sinks, scale); };
}

AttentionOptions sliding_window_attention_options(SlidingWindowOptions options) {
  return AttentionOptions(std::make_shared<const SlidingWindowPattern>(options));
}

}  // namespace sb
