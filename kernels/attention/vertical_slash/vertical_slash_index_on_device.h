#pragma once
// The index's heavy steps for several query heads of one sequence at once, on the inputs'
// device (docs/vertical_slash.md, "On GPUs"): the last queries' attention ([heads, n, L]
// float64), the vertical and slash scores summed there (one copy of [heads, 2, L] to the
// host for the tests) and the lists cut there by vertical_slash_select's rule, and each chosen
// index's coverage (the kept mass summed there under the pattern's block mask). The same
// ATen ops run on the CPU, where the tests compare them with the host steps of
// vertical_slash_index.h.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "kernels/attention/vertical_slash/vertical_slash_index.h"

namespace sb {

class VerticalSlashHeadsAttention {
 public:
  // Query heads first_head .. first_head + heads - 1 of the sequence `inputs` holds.
  VerticalSlashHeadsAttention(const VerticalSlashSequenceInputs& inputs, int64_t first_head, int64_t heads,
                              double scale);

  // Per head, on the host: the vertical and slash scores select() cuts
  // (vertical_slash_scores' numbers, summed in another order; the tests compare the two).
  std::vector<VerticalSlashScores> scores() const;
  // Per head: the attention mass on the keys `index[h]` keeps, over n (vertical_slash_coverage).
  std::vector<double> coverage(const std::vector<VerticalSlashHeadIndex>& index) const;
  // Per head: the lists vertical_slash_select chooses from these scores, cut on the device
  // (each list's candidates sorted there, descending with ties by position, the top-p cut
  // from their running sum); only the cut lists come to the host. Coverage left at 1.
  std::vector<VerticalSlashHeadIndex> select(const VerticalSlashParams& params) const;

  const at::Tensor& attention() const { return attention_; }  // [heads, n, L], 0 past each query

 private:
  at::Tensor sums() const;  // [heads, 2, L] on the device: vertical, then slash scores

  at::Tensor attention_;
  int64_t length_ = 0, n_ = 0;
};

// Query heads per batch of VerticalSlashHeadsAttention for this sequence: at most about
// 256 MiB of its working memory at a time.
int64_t vertical_slash_heads_per_batch(const VerticalSlashSequenceInputs& inputs, int64_t q_heads);

// vertical_slash_index's lists and coverage for every query head of one sequence, with the
// attention, scores and coverage on the inputs' device, heads taken in chunks of at most
// about 256 MiB of attention.
std::vector<VerticalSlashHeadIndex> vertical_slash_sequence_index_on_device(const VerticalSlashSequenceInputs& inputs,
                                                                            int64_t q_heads,
                                                                            const VerticalSlashParams& params,
                                                                            double scale);

}  // namespace sb
