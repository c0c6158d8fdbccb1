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

#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"

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

// The steps shared with the index under context parallelism (vertical_slash_ring_sums.h),
// on the attention's device, in its type (float64):
//   the vertical and slash scores of attention [H, n, m]: the last n queries' attention to
//   the m keys at key_positions ([m] ascending positions of the sequence, long, on the
//   attention's device; 0 past each query). Returns [H, 2, length], vertical then slash;
//   keys not held contribute nothing. Deterministic: on a GPU the slash sums are a
//   strided sum over a reversed copy, on the CPU a loop over the entries
//   (vertical_slash_add_scores); `way` picks one (the offset view runs on the CPU too, for
//   the tests);
enum class VerticalSlashSlashSums { kByDevice, kOffsetView, kLoop };
at::Tensor vertical_slash_score_sums(const at::Tensor& attention, int64_t length, int64_t n,
                                     const at::Tensor& key_positions,
                                     VerticalSlashSlashSums way = VerticalSlashSlashSums::kByDevice);
//   each last query block's attention summed over its rows: attention [H, n, m] (the last
//   n queries' attention to m keys, 0 past each query) gives [H, blocks, m], blocks the
//   query blocks (of `block` tokens) the last queries span, first to last. A query
//   block keeps the same keys for all its queries, and the causal mask is already in the
//   zeros, so a kept mass is a sum over these rows;
at::Tensor vertical_slash_query_block_columns(const at::Tensor& attention, int64_t length, int64_t n, int64_t block);
//   the attention mass each head's lists keep, from its query block columns [H, blocks,
//   m] of `block`-token query blocks over the keys at key_positions (ascending positions
//   of the sequence); lists[h] is head h's (its block_size must be `block`); returns [H]
//   on the columns' device. The kept keys of each query block are marked on the host
//   (vertical_slash_block_keys).
at::Tensor vertical_slash_kept_masses(const at::Tensor& block_columns, int64_t block,
                                      const std::vector<const VerticalSlashHeadIndex*>& lists, int64_t length, int64_t n,
                                      const std::vector<int64_t>& key_positions);

}  // namespace sb
