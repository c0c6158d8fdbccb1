#pragma once
// The vocabulary split over tensor-parallel ranks: the embedding's rows and the head's
// output rows. Rank r holds token ids [floor(r V / tp), floor((r + 1) V / tp)), so any
// vocabulary size splits (Qwen2.5's 151936 and 152064 divide by 8; the test models'
// need not), and no rank ever holds full-vocabulary logits.

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "harness/parallel/tensor_parallel/tensor_parallel_group.h"

namespace sb {

struct ShardRange {
  int64_t start = 0;  // first token id this rank holds
  int64_t end = 0;    // one past the last
  int64_t size() const { return end - start; }
};

// The [floor(r n / tp), floor((r + 1) n / tp)) part of n rows that rank r of tp holds:
// the vocabulary, and every evenly split dimension (where tp divides n it is n / tp each).
ShardRange split_range(int64_t n, int64_t tp, int64_t rank);

// ids [T] int64 (any token id), weight [shard.size(), H] -> [T, H]: the embedding rows of
// the ids this rank holds, zero elsewhere. Summed over the TP ranks (the reduce-scatter
// that follows the embedding) it is the plain embedding. Differentiable in weight.
at::Tensor vocab_parallel_embedding(const at::Tensor& ids, const at::Tensor& weight, ShardRange shard);

// The summed token cross-entropy of logits split by vocabulary: logits [T, shard.size()]
// float (this rank's columns), labels [T] int64 full token ids, kIgnoreLabel rows left
// out -> scalar, the same on every TP rank and equal to
// cross_entropy(full logits, labels, reduction sum, ignore_index kIgnoreLabel).
// Per row: log sum_v exp(z_v - m) - (z_label - m) with m the row's maximum over every
// rank; two all-reduces (the maximum, then the exp-sums with the label's logit).
// Backward: softmax(z) - onehot(label) for this rank's columns, times the incoming
// gradient; no communication.
at::Tensor vocab_parallel_cross_entropy_sum(const at::Tensor& logits, const at::Tensor& labels, ShardRange shard,
                                            TensorParallelGroup& group);

}  // namespace sb
