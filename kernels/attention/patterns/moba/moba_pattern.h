#pragma once
// MoBA (Mixture of Block Attention) as a pattern ("moba"; docs/sparsebalance.md 1.1):
// each query block reads its own block causally and the top-(k - 1) earlier key blocks
// its gate scores highest. Budget axis: k key blocks of block_size tokens.

#include <cstdint>
#include <memory>

#include "kernels/attention/patterns/attention_pattern.h"
#include "kernels/attention/patterns/moba/moba_cuda_kernel.h"
#include "kernels/attention/patterns/moba/moba_gate.h"

namespace sb {

struct MobaOptions {
  int64_t block_size = 256;  // tokens per key/value block (paper: 256)
  int64_t top_k = 32;        // the default budget k0, the diagonal block included (paper: 32)
  MobaGate gate = MobaGate::kBlock;  // per query token (MoBA's) or per query block ([our rule])
  MobaCudaKernel cuda_kernel = MobaCudaKernel::kAuto;  // the CUDA attention path (block gate)

  bool operator==(const MobaOptions& o) const {
    return block_size == o.block_size && top_k == o.top_k && gate == o.gate && cuda_kernel == o.cuda_kernel;
  }
};

class MobaPattern : public AttentionPattern {
 public:
  explicit MobaPattern(MobaOptions options) : options_(options) {}
  const MobaOptions& options() const { return options_; }

  std::string name() const override { return "moba"; }
  std::string title() const override { return "MoBA"; }
  bool same(const AttentionPattern& other) const override;
  // The same block size and gate (k0 and the CUDA path change nothing a budget keeps).
  bool same_selection(const AttentionPattern& other) const override;
  BudgetAxis budget_axis() const override { return BudgetAxis::kKeyBlocks; }
  int64_t default_budget() const override { return options_.top_k; }
  int64_t budget_unit_tokens() const override { return options_.block_size; }
  bool reports_coverage_curve() const override { return true; }
  // Powers of two up to the longest sample's blocks, those blocks, k0 and DST's cap.
  std::vector<int64_t> profile_budgets(int64_t longest_sample, int64_t dst_k_max) const override;
  // "token_gate" 1 under the token gate (profiles without the field read as 0: the block gate).
  std::vector<std::pair<std::string, int64_t>> profile_fields() const override {
    return {{"block_size", options_.block_size}, {"token_gate", options_.gate == MobaGate::kToken ? 1 : 0}};
  }
  // "token_gate" reads as the gate and its manifest key.
  std::string profile_field_mismatch(const std::string& field, int64_t measured, int64_t wanted) const override;
  std::unique_ptr<AttentionBackend> make_backend() const override;
  std::shared_ptr<RingPatternSelector> make_ring_selector() const override;
  // On CUDA its attention runs in bfloat16 only; the token gate does not run under CP (yet).
  std::optional<AttentionTrainingProblem> training_problem(const AttentionTrainingSetting& setting) const override;
  // Query block j of a sequence reads its own block's causal triangle and min(k - 1, j)
  // earlier blocks whole.
  double attended_pairs(int64_t length, int64_t budget) const override;
  // The gate's scores: 2 D per (routing row, eligible block); a row is a query block or,
  // under the token gate, a query.
  double selection_forward_flops(int64_t length, int64_t q_heads, int64_t head_dim) const override;
  // The block gate: one all-reduce of float64 sums of q and k per block. The token gate:
  // the key blocks' sums, the floor's curve (with a floor), the coverage per sequence.
  std::vector<SelectionAllreduces> ring_selection_allreduces(const std::vector<int64_t>& lengths, bool budgeted,
                                                             bool floor, int64_t query_heads, int64_t kv_heads,
                                                             int64_t head_dim) const override;
  // A coverage floor reads every head's curve: one sum.
  double tensor_parallel_sums_per_layer(bool floor, bool /*budgeted*/) const override { return floor ? 1.0 : 0.0; }
  double kept_pairs(const at::Tensor& q, const at::Tensor& k, const PackedSequences& sequences,
                    double scale) const override;
  at::Tensor reference_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const PackedSequences& sequences, double scale, int64_t first_row) const override;

 private:
  MobaOptions options_;
};

AttentionOptions moba_attention_options(MobaOptions options);
AttentionOptions moba_attention_options(int64_t block_size, int64_t top_k);

}  // namespace sb
