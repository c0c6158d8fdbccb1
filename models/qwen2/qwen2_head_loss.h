#pragma once
// The language-model head fused with its cross-entropy, row chunk by row chunk, so that
// no [T, V] logits tensor exists in forward or backward (docs/memory.md). At Qwen2.5's
// vocabulary of 151,936 the whole-matrix path held [T, V] float32 logits, their softmax
// and their gradient: 80 GB each at 131,072 tokens. Here one chunk of rows lives at a
// time (head_loss_chunk_rows: about 256 MiB of float32 logits, our rule), the forward
// keeps one float32 log-sum-exp per row, and the backward recomputes each chunk's
// logits from the normed hidden states and the head weight.
//
// Numerics are the unfused path's: the head's matmul runs in the compute dtype (the
// autocast dtype when autocast is on for the device, else the hidden states' dtype),
// the logits are widened to float32, the loss is float32 (float64 throughout for
// float64 inputs, which the tests use as the exact reference). The weight gradient is
// summed over chunks in float32.
//
// Under tensor parallelism the head is split by vocabulary (docs/tensor_parallel.md):
// each rank passes its rows of the weight and the first token id it holds, and
// `reduce` all-reduces [k, T] float32 tensors over the ranks (two calls per forward: the
// rows' maxima, then their shifted exp-sums with the label's logit; none in backward).
// The loss is then the same on every rank; the hidden-state gradient is this rank's
// part of it, summed over the ranks by whatever gathered the hidden states.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>

namespace sb {

// All-reduces `values` in place over the ranks holding the other vocabulary columns:
// the maximum when `maximum`, else the sum.
using VocabularyAllReduce = std::function<void(at::Tensor& values, bool maximum)>;

struct HeadLossOptions {
  int64_t vocabulary_start = 0;  // token id of the weight's first row
  int64_t chunk_rows = 0;        // rows per chunk; 0: head_loss_chunk_rows(weight rows)
  VocabularyAllReduce reduce;    // empty: the weight holds the whole vocabulary
};

// Rows per chunk for a head of `vocabulary_columns` output columns: about 256 MiB of
// float32 logits, at least 1 (441 rows at 151,936 columns).
int64_t head_loss_chunk_rows(int64_t vocabulary_columns);

// normed [T, H] (the final norm's output), weight [Vr, H] (the head, or the tied
// embedding), labels [T] int64 full-vocabulary ids, negative ids (kIgnoreLabel) ignored -> the
// summed token cross-entropy, a float32 scalar (float64 for float64 inputs); ignored rows add 0. Differentiable in normed and
// weight (whichever requires grad).
at::Tensor head_cross_entropy_sum(const at::Tensor& normed, const at::Tensor& weight, const at::Tensor& labels,
                                  const HeadLossOptions& options = {});

// The same per row, without autograd: [T] token losses (float32, or float64) (0 on ignored rows), for
// evaluation over every position of a long sequence.
at::Tensor head_token_losses(const at::Tensor& normed, const at::Tensor& weight, const at::Tensor& labels,
                             const HeadLossOptions& options = {});

}  // namespace sb
