#include "kernels/attention/patterns/vertical_slash/vertical_slash_pattern.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/attention/patterns/vertical_slash/vertical_slash_backend.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_blocks.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_reference.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_selector.h"

namespace sb {

bool VerticalSlashPattern::same(const AttentionPattern& other) const {
  const auto* vs = dynamic_cast<const VerticalSlashPattern*>(&other);
  return vs != nullptr && vs->options_.params == options_.params && vs->options_.expected_keys == options_.expected_keys;
}

bool VerticalSlashPattern::same_selection(const AttentionPattern& other) const {
  const auto* vs = dynamic_cast<const VerticalSlashPattern*>(&other);
  return vs != nullptr && vs->options_.params == options_.params;
}

std::vector<int64_t> VerticalSlashPattern::profile_budgets(int64_t longest_sample, int64_t /*dst_k_max*/) const {
  const int64_t dense = (std::max<int64_t>(longest_sample, 1) + 2) / 2;
  std::vector<int64_t> budgets;
  for (int64_t k = 64; k < dense; k *= 2) budgets.push_back(k);
  budgets.push_back(dense);
  budgets.push_back(std::min(options_.expected_keys, dense));
  std::sort(budgets.begin(), budgets.end());
  budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
  return budgets;
}

std::vector<std::pair<std::string, int64_t>> VerticalSlashPattern::profile_fields() const {
  const VerticalSlashParams& v = options_.params;
  return {{"block_size", v.block_size},       {"last_queries", v.last_queries}, {"sink_tokens", v.sink_tokens},
          {"local_window", v.local_window},   {"max_verticals", v.max_verticals}, {"max_slashes", v.max_slashes}};
}

std::unique_ptr<AttentionBackend> VerticalSlashPattern::make_backend() const {
  return std::make_unique<VerticalSlashAttention>(options_.params);
}

std::shared_ptr<RingPatternSelector> VerticalSlashPattern::make_ring_selector() const {
  return std::make_shared<VerticalSlashRingSelector>(options_.params);
}

std::optional<AttentionTrainingProblem> VerticalSlashPattern::training_problem(
    const AttentionTrainingSetting& setting) const {
  if (setting.cuda && !setting.bf16) {
    return AttentionTrainingProblem{"precision",
                                    "is \"" + setting.precision + "\" but " + setting.method +
                                        " uses vertical_slash on CUDA, whose fused block-sparse kernels run in bfloat16",
                                    "set train.precision to \"bf16-mixed\""};
  }
  if (setting.cuda && setting.head_dim != 64 && setting.head_dim != 128) {
    return AttentionTrainingProblem{"attention",
                                    "is vertical_slash on CUDA but the model's head_dim is " +
                                        std::to_string(setting.head_dim) +
                                        ": the fused block-sparse kernels take 64 or 128",
                                    "use a model with head_dim 64 or 128, or set train.device to \"cpu\""};
  }
  if (!setting.cuda && setting.bf16) {
    return AttentionTrainingProblem{"precision",
                                    "is \"" + setting.precision +
                                        "\" with vertical_slash attention, whose CPU kernel computes in float32 or "
                                        "float64",
                                    "set train.precision to \"fp32\""};
  }
  return std::nullopt;
}

double VerticalSlashPattern::attended_pairs(int64_t length, int64_t budget) const {
  if (budget < 1) throw std::invalid_argument("attention_pairs: budget must be >= 1");
  const auto l = static_cast<double>(length);
  return l * std::min(static_cast<double>(budget), (l + 1) / 2);
}

double VerticalSlashPattern::selection_forward_flops(int64_t length, int64_t q_heads, int64_t head_dim) const {
  return 2.0 * static_cast<double>(head_dim * q_heads) *
         static_cast<double>(std::min(options_.params.last_queries, length)) * static_cast<double>(length);
}

std::vector<SelectionAllreduces> VerticalSlashPattern::ring_selection_allreduces(
    const std::vector<int64_t>& lengths, bool budgeted, bool floor, int64_t query_heads, int64_t /*kv_heads*/,
    int64_t head_dim) const {
  const auto heads = static_cast<double>(query_heads);
  double last = 0, tokens = 0;
  int64_t longest = 1;
  for (int64_t length : lengths) {
    last += static_cast<double>(std::min(options_.params.last_queries, length));
    tokens += static_cast<double>(length);
    longest = std::max(longest, length);
  }
  const double per_head = static_cast<double>(lengths.size()) * heads * 8.0;
  std::vector<SelectionAllreduces> out{{last * heads * static_cast<double>(head_dim) * 8.0, 1.0},
                                       {last * heads * 8.0, 2.0},
                                       {heads * 2.0 * tokens * 8.0, 1.0},
                                       {per_head, 1.0}};
  if (budgeted || floor) out.push_back({per_head, 1.0});
  if (floor) out.push_back({per_head, std::ceil(std::log2(2.0 * static_cast<double>(longest))) + 1.0});
  return out;
}

double VerticalSlashPattern::tensor_parallel_sums_per_layer(bool /*floor*/, bool budgeted) const {
  return 1.0 + (budgeted ? 1.0 + kVerticalSlashLevelSearchRounds : 0.0);
}

double VerticalSlashPattern::kept_pairs(const at::Tensor& q, const at::Tensor& k, const PackedSequences& sequences,
                                        double scale) const {
  const auto index = vertical_slash_index(q.cpu(), k.cpu(), sequences, options_.params, scale);
  double pairs = 0;
  for (size_t s = 0; s < index.size(); ++s) {
    for (const VerticalSlashHeadIndex& head : index[s]) {
      pairs += static_cast<double>(vertical_slash_kept_pairs(head, sequences.length(static_cast<int64_t>(s))));
    }
  }
  return pairs;
}

at::Tensor VerticalSlashPattern::reference_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                const PackedSequences& sequences, double scale,
                                                int64_t first_row) const {
  const auto index = vertical_slash_index(q, k, sequences, options_.params, scale);
  return vertical_slash_reference_rows(q.cpu(), k.cpu(), v.cpu(), index.front(), scale, first_row);
}

std::function<void()> VerticalSlashPattern::selection_step(const at::Tensor& q, const at::Tensor& k,
                                                           const PackedSequences& sequences, double scale) const {
  const VerticalSlashParams params = options_.params;
  return [q, k, sequences, params, scale] { vertical_slash_index(q, k, sequences, params, scale); };
}

AttentionOptions vertical_slash_attention_options(VerticalSlashOptions options) {
  return AttentionOptions(std::make_shared<const VerticalSlashPattern>(options));
}

AttentionOptions vertical_slash_attention_options(const VerticalSlashParams& params) {
  VerticalSlashOptions options;
  options.params = params;
  return vertical_slash_attention_options(options);
}

}  // namespace sb
