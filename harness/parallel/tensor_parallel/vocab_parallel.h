#pragma once
// The vocabulary split over tensor-parallel ranks: the embedding's rows and the head's
// output rows. Rank r holds token ids [floor(r V / tp), floor((r + 1) V / tp)), so any
// vocabulary size splits (Qwen2.5's 151936 and 152064 divide by 8; the test models'
// need not), and no rank ever holds full-vocabulary logits. The vocabulary-parallel
// loss is models/qwen2/qwen2_head_loss.h with this rank's start and an all-reduce.

#include <ATen/core/Tensor.h>

#include <cstdint>

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

}  // namespace sb
