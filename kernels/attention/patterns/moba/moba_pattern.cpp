#include "kernels/attention/patterns/moba/moba_pattern.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/attention/patterns/moba/moba_attended_pairs.h"
#include "kernels/attention/patterns/moba/moba_attention_backend.h"
#include "kernels/attention/patterns/moba/moba_reference.h"
#include "kernels/attention/patterns/moba/moba_ring_selector.h"

namespace sb {
namespace {

MobaParams params_of(const MobaOptions& options, double scale) {
  MobaParams params;
  params.block_size = options.block_size;
  params.gate = options.gate;
  params.top_k = {options.top_k};
  params.scale = scale;
  params.cuda_kernel = options.cuda_kernel;
  return params;
}

}  // namespace

bool MobaPattern::same(const AttentionPattern& other) const {
  const auto* moba = dynamic_cast<const MobaPattern*>(&other);
  return moba != nullptr && moba->options_ == options_;
}

bool MobaPattern::same_selection(const AttentionPattern& other) const {
  const auto* moba = dynamic_cast<const MobaPattern*>(&other);
  return moba != nullptr && moba->options_.block_size == options_.block_size && moba->options_.gate == options_.gate;
}

std::vector<int64_t> MobaPattern::profile_budgets(int64_t longest_sample, int64_t dst_k_max) const {
  const int64_t block = std::max<int64_t>(1, options_.block_size);
  const int64_t blocks = std::max<int64_t>(1, (std::max<int64_t>(longest_sample, 1) + block - 1) / block);
  std::vector<int64_t> budgets;
  for (int64_t k = 1; k <= blocks; k *= 2) budgets.push_back(k);
  budgets.push_back(blocks);
  budgets.push_back(options_.top_k);
  if (dst_k_max > 0) budgets.push_back(dst_k_max);
  std::sort(budgets.begin(), budgets.end());
  budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
  return budgets;
}

std::string MobaPattern::profile_field_mismatch(const std::string& field, int64_t measured, int64_t wanted) const {
  if (field != "token_gate") return AttentionPattern::profile_field_mismatch(field, measured, wanted);
  const auto gate = [](int64_t token) { return std::string(token != 0 ? "token" : "block"); };
  return "MoBA's " + gate(measured) + " gate, not its " + gate(wanted) + " gate ($.methods[].attention.gate)";
}

std::unique_ptr<AttentionBackend> MobaPattern::make_backend() const {
  return std::make_unique<MobaAttention>(options_.block_size, options_.top_k, options_.cuda_kernel, options_.gate);
}

std::shared_ptr<RingPatternSelector> MobaPattern::make_ring_selector() const {
  return std::make_shared<MobaRingSelector>(options_.block_size, options_.top_k, options_.gate);
}

std::optional<AttentionTrainingProblem> MobaPattern::training_problem(const AttentionTrainingSetting& setting) const {
  if (setting.cp > 1 && setting.cuda && options_.gate == MobaGate::kToken) {
    return AttentionTrainingProblem{"attention",
                                    "uses MoBA's token gate under context parallelism (cp " + std::to_string(setting.cp) +
                                        ") on CUDA, where the GPU ring has no per-query key blocks yet (the CPU ring has)",
                                    "set the attention's \"gate\" to \"block\", or train without context parallelism"};
  }
  if (!setting.cuda || setting.bf16) return std::nullopt;
  return AttentionTrainingProblem{"precision",
                                  "is \"" + setting.precision + "\" but " + setting.method +
                                      " uses MoBA on CUDA, whose attention (flash-attention varlen) runs only in bfloat16",
                                  "set train.precision to \"bf16-mixed\""};
}

double MobaPattern::attended_pairs(int64_t length, int64_t budget) const {
  const int64_t block_size = options_.block_size;
  if (block_size < 1 || budget < 1) throw std::invalid_argument("attention_pairs: block size and budget must be >= 1");
  double pairs = 0;
  const int64_t blocks = (length + block_size - 1) / block_size;
  for (int64_t j = 0; j < blocks; ++j) {
    const auto q = static_cast<double>(std::min(block_size, length - j * block_size));
    const int64_t earlier = std::min(budget - 1, j);  // selected blocks before the diagonal one
    pairs += q * (q + 1) / 2 + q * static_cast<double>(earlier * block_size);
  }
  return pairs;
}

double MobaPattern::selection_forward_flops(int64_t length, int64_t q_heads, int64_t head_dim) const {
  const int64_t block = options_.block_size;
  const auto blocks = static_cast<double>((length + block - 1) / block);
  if (options_.gate == MobaGate::kBlock) return 2.0 * static_cast<double>(head_dim * q_heads) * blocks * (blocks + 1) / 2;
  double eligible = 0;  // summed over the queries: the query at position p scores blocks 0 .. p / block
  for (int64_t p = 0; p < length; ++p) eligible += static_cast<double>(p / block + 1);
  return 2.0 * static_cast<double>(head_dim * q_heads) * eligible;
}

std::vector<SelectionAllreduces> MobaPattern::ring_selection_allreduces(const std::vector<int64_t>& lengths,
                                                                        bool /*budgeted*/, bool floor,
                                                                        int64_t query_heads, int64_t kv_heads,
                                                                        int64_t head_dim) const {
  int64_t blocks = 0, longest = 0;
  for (int64_t length : lengths) {
    const int64_t n = (length + options_.block_size - 1) / options_.block_size;
    blocks += n;
    longest = std::max(longest, n);
  }
  const auto sequences = static_cast<double>(lengths.size());
  if (options_.gate == MobaGate::kBlock) {  // query and key block sums; every rank then routes alike
    return {{static_cast<double>((query_heads + kv_heads) * blocks * head_dim) * 8.0, 1.0}};
  }
  // Key block sums; the floor's curve (at most the longest sequence's blocks, and the
  // rows); the coverage sums and queries per sequence.
  std::vector<SelectionAllreduces> allreduces{{static_cast<double>(kv_heads * blocks * head_dim) * 8.0, 1.0}};
  if (floor) allreduces.push_back({static_cast<double>(longest + 1) * 8.0, 1.0});
  allreduces.push_back({2.0 * sequences * 8.0, 1.0});
  return allreduces;
}

double MobaPattern::kept_pairs(const at::Tensor& q, const at::Tensor& k, const PackedSequences& sequences,
                               double scale) const {
  return moba_attended_pairs(q, k, sequences, params_of(options_, scale));
}

at::Tensor MobaPattern::reference_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                       const PackedSequences& sequences, double scale, int64_t first_row) const {
  return moba_reference(q.cpu(), k.cpu(), v.cpu(), sequences, sequences, params_of(options_, scale), first_row,
                        q.size(0))
      .out;
}

AttentionOptions moba_attention_options(MobaOptions options) {
  return AttentionOptions(std::make_shared<const MobaPattern>(options));
}

AttentionOptions moba_attention_options(int64_t block_size, int64_t top_k) {
  MobaOptions options;
  options.block_size = block_size;
  options.top_k = top_k;
  return moba_attention_options(options);
}

}  // namespace sb
