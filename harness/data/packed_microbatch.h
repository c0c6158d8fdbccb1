#pragma once
// Turns the samples of one micro-batch into the packed tensors the model reads.

#include <ATen/core/Tensor.h>

#include <vector>

#include "harness/data/sample.h"
#include "kernels/attention/core/packed_sequences.h"

namespace sb {

// Label value of positions that carry no loss (prompt tokens, the last token of each
// sequence); matches cross_entropy's ignore_index.
constexpr int64_t kIgnoreLabel = -100;

struct PackedMicroBatch {
  at::Tensor tokens;        // [T] int64
  at::Tensor position_ids;  // [T] int64, restarting at 0 in every sequence
  at::Tensor labels;        // [T] int64: the next token, or kIgnoreLabel
  PackedSequences sequences;
  int64_t loss_tokens = 0;  // number of labels != kIgnoreLabel
};

PackedMicroBatch pack_microbatch(const std::vector<const Sample*>& samples);

}  // namespace sb
