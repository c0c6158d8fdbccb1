// The head fused with its cross-entropy (models/qwen2/qwen2_head_loss.h) against the
// whole-logits path it replaces: at::cross_entropy_loss over at::linear's [T, V] logits,
// in float64 (exact up to rounding), in float32 (the training path, 1e-6 relative), and
// under bf16 autocast; chunks of 1 row, of a few rows, of all rows, and the automatic
// size; ignored labels; a frozen head (LoRA) and frozen inputs; the vocabulary split
// over TP ranks (Gloo threads) with a vocabulary that does not divide by tp. The model
// level (tied and untied heads, every parameter's gradient) is compared too.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <mutex>
#include <string>
#include <vector>

#include "harness/data/packed_microbatch.h"
#include "harness/parallel/tensor_parallel/tensor_parallel_group.h"
#include "harness/parallel/tensor_parallel/vocab_parallel.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"
#include "models/qwen2/qwen2_head_loss.h"
#include "models/qwen2/qwen2_model.h"
#include "models/qwen2/qwen2_precision.h"
#include "tests/support/tensor_parallel_threads.h"

namespace sb {
namespace {

double relative_error(const at::Tensor& actual, const at::Tensor& expected) {
  const double scale = expected.abs().max().item<double>();
  return (actual.to(at::kDouble) - expected.to(at::kDouble)).abs().max().item<double>() / (scale > 0 ? scale : 1.0);
}

struct HeadProblem {
  at::Tensor normed, weight, labels;  // [T, H], [V, H], [T]
};

// Labels spread over the vocabulary, two of them ignored, one repeated.
HeadProblem head_problem(int64_t tokens, int64_t hidden, int64_t vocab, at::ScalarType dtype, uint64_t seed) {
  at::manual_seed(seed);
  HeadProblem p;
  p.normed = at::randn({tokens, hidden}, dtype);
  p.weight = 0.5 * at::randn({vocab, hidden}, dtype);
  p.labels = at::randint(0, vocab, {tokens}, at::kLong);
  p.labels[1] = kIgnoreLabel;
  p.labels[tokens - 1] = kIgnoreLabel;
  p.labels[2] = vocab - 1;
  p.labels[3] = vocab - 1;
  return p;
}

struct LossAndGrads {
  at::Tensor loss, grad_normed, grad_weight;
};

LossAndGrads whole_logits(const HeadProblem& p) {
  const at::Tensor normed = p.normed.detach().clone().requires_grad_(true);
  const at::Tensor weight = p.weight.detach().clone().requires_grad_(true);
  at::Tensor logits = at::linear(normed, weight);  // [T, V]; bfloat16 under autocast
  if (logits.scalar_type() != at::kDouble) logits = logits.to(at::kFloat);
  const at::Tensor loss = at::cross_entropy_loss(logits, p.labels, {}, at::Reduction::Sum, kIgnoreLabel);
  (0.75 * loss).backward();
  return {loss.detach(), normed.grad(), weight.grad()};
}

LossAndGrads fused(const HeadProblem& p, int64_t chunk_rows) {
  const at::Tensor normed = p.normed.detach().clone().requires_grad_(true);
  const at::Tensor weight = p.weight.detach().clone().requires_grad_(true);
  HeadLossOptions options;
  options.chunk_rows = chunk_rows;
  const at::Tensor loss = head_cross_entropy_sum(normed, weight, p.labels, options);
  (0.75 * loss).backward();
  return {loss.detach(), normed.grad(), weight.grad()};
}

TEST(HeadLoss, EqualsTheWholeLogitsPathInFloat64AndFloat32ForEveryChunkSize) {
  const int64_t tokens = 11, hidden = 6, vocab = 37;
  for (const at::ScalarType dtype : {at::kDouble, at::kFloat}) {
    const HeadProblem p = head_problem(tokens, hidden, vocab, dtype, 3);
    const LossAndGrads reference =
        whole_logits({p.normed.to(at::kDouble), p.weight.to(at::kDouble), p.labels});  // float64 oracle
    const double tolerance = dtype == at::kDouble ? 1e-12 : 1e-6;
    for (const int64_t rows : {int64_t{1}, int64_t{4}, tokens, int64_t{0}}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + ", chunks of " + std::to_string(rows) + " rows");
      const LossAndGrads got = fused(p, rows);
      EXPECT_EQ(got.loss.scalar_type(), dtype);  // float32 logits and loss, as the whole-logits path
      EXPECT_LE(relative_error(got.loss, reference.loss), tolerance);
      EXPECT_LE(relative_error(got.grad_normed, reference.grad_normed), tolerance);
      EXPECT_LE(relative_error(got.grad_weight, reference.grad_weight), tolerance);
      EXPECT_EQ(got.grad_normed.scalar_type(), dtype);
      EXPECT_EQ(got.grad_weight.scalar_type(), dtype);
      // Ignored rows get no gradient.
      EXPECT_EQ(got.grad_normed[1].abs().max().item<double>(), 0.0);
    }
  }
}

TEST(HeadLoss, PerTokenLossesAreTheUnreducedCrossEntropy) {
  const HeadProblem p = head_problem(9, 5, 23, at::kDouble, 4);
  const at::Tensor expected =
      at::cross_entropy_loss(at::linear(p.normed, p.weight), p.labels, {}, at::Reduction::None, kIgnoreLabel);
  HeadLossOptions options;
  options.chunk_rows = 2;
  const at::Tensor got = head_token_losses(p.normed, p.weight, p.labels, options);
  ASSERT_EQ(got.sizes(), expected.sizes());
  EXPECT_LE(relative_error(got, expected), 1e-12);
  EXPECT_EQ(got[1].item<double>(), 0.0);
}

TEST(HeadLoss, AFrozenHeadOrFrozenInputsGetNoGradient) {
  const HeadProblem p = head_problem(7, 4, 13, at::kDouble, 5);
  const LossAndGrads reference = whole_logits(p);
  {  // LoRA: the head is frozen, the hidden states still learn.
    const at::Tensor normed = p.normed.clone().requires_grad_(true);
    head_cross_entropy_sum(normed, p.weight, p.labels).mul(0.75).backward();
    EXPECT_LE(relative_error(normed.grad(), reference.grad_normed), 1e-12);
  }
  {  // The head alone learns.
    const at::Tensor weight = p.weight.clone().requires_grad_(true);
    head_cross_entropy_sum(p.normed, weight, p.labels).mul(0.75).backward();
    EXPECT_LE(relative_error(weight.grad(), reference.grad_weight), 1e-12);
  }
}

TEST(HeadLoss, UnderBf16AutocastMatchesTheWholeLogitsPathUnderAutocast) {
  const HeadProblem p = head_problem(33, 16, 301, at::kFloat, 6);
  LossAndGrads whole, chunked;
  {
    const Qwen2AutocastGuard autocast(c10::DeviceType::CPU, Qwen2Precision::kBFloat16Mixed);
    whole = whole_logits(p);
    chunked = fused(p, 8);
  }
  // Both run the head's matmul in bfloat16 and the loss in float32; the fused path sums
  // the weight gradient over chunks in float32 rather than in one bfloat16 matmul.
  EXPECT_LE(relative_error(chunked.loss, whole.loss), 1e-5);
  EXPECT_LE(relative_error(chunked.grad_normed, whole.grad_normed), 1e-2);
  EXPECT_LE(relative_error(chunked.grad_weight, whole.grad_weight), 1e-2);
  EXPECT_EQ(chunked.grad_weight.scalar_type(), at::kFloat);  // master weights stay float32
  // And far from the float32 path's answer: the matmul did run in bfloat16.
  const LossAndGrads fp32 = fused(p, 8);
  EXPECT_GT(relative_error(chunked.grad_weight, fp32.grad_weight), 1e-4);
}

TEST(HeadLoss, VocabularySplitOverTensorParallelRanksIsTheWholeLoss) {
  const int64_t tokens = 10, hidden = 5, vocab = 29;  // 29 does not divide by 2 or 3
  const HeadProblem p = head_problem(tokens, hidden, vocab, at::kDouble, 7);
  const LossAndGrads reference = whole_logits(p);
  for (const int64_t tp : {2, 3}) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    const at::Tensor grad_normed_sum = at::zeros_like(p.normed);
    std::mutex sum_mutex;
    test::run_tp_ranks(tp, [&](std::shared_ptr<TensorParallelGroup> group) {
      const ShardRange shard = split_range(vocab, tp, group->rank());
      const at::Tensor normed = p.normed.clone().requires_grad_(true);
      const at::Tensor weight = p.weight.narrow(0, shard.start, shard.size()).clone().requires_grad_(true);
      HeadLossOptions options;
      options.vocabulary_start = shard.start;
      options.chunk_rows = 3;
      int calls = 0;
      options.reduce = [&](at::Tensor& values, bool maximum) {
        ++calls;
        group->all_reduce(values, maximum ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM);
      };
      const at::Tensor loss = head_cross_entropy_sum(normed, weight, p.labels, options);
      EXPECT_LE(relative_error(loss, reference.loss), 1e-12);  // the same on every rank
      (0.75 * loss).backward();
      EXPECT_EQ(calls, 2);  // the maxima and the sums; the backward communicates nothing
      EXPECT_LE(relative_error(weight.grad(), reference.grad_weight.narrow(0, shard.start, shard.size())), 1e-12);
      const std::lock_guard<std::mutex> lock(sum_mutex);
      grad_normed_sum.add_(normed.grad());
    });
    // Each rank's hidden-state gradient is its vocabulary's part; their sum is the whole.
    EXPECT_LE(relative_error(grad_normed_sum, reference.grad_normed), 1e-12);
  }
}

TEST(HeadLoss, RejectsMismatchedShapesNamingThem) {
  const HeadProblem p = head_problem(4, 3, 8, at::kFloat, 8);
  try {
    head_cross_entropy_sum(p.normed, p.weight.narrow(1, 0, 2), p.labels);
    FAIL() << "a [V, 2] head for [T, 3] hidden states was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[8, 2]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(head_cross_entropy_sum(p.normed, p.weight, p.labels.to(at::kInt)), std::invalid_argument);
}

TEST(HeadLoss, ChunkRowsKeepAChunkNear256MiBOfLogits) {
  EXPECT_EQ(head_loss_chunk_rows(151936), 441);  // Qwen2.5: 441 x 151,936 x 4 bytes = 256 MiB
  EXPECT_EQ(head_loss_chunk_rows(int64_t{1} << 40), 1);
}

// The model's fused loss against its logits through cross_entropy: tied and untied
// heads, every parameter's gradient.
TEST(HeadLoss, ModelLossEqualsCrossEntropyOfItsLogitsWithEveryGradient) {
  for (const bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied head" : "own head");
    Qwen2Config config = qwen2_preset("qwen2-tiny");
    config.tie_word_embeddings = tied;
    at::manual_seed(11);
    Qwen2ForCausalLM model(config, std::shared_ptr<AttentionBackend>(dense_attention_options().make_backend()));
    const std::vector<int64_t> lengths{9, 14};
    const int64_t total = 23;
    const at::Tensor tokens = at::randint(0, config.vocab_size, {total}, at::kLong);
    at::Tensor labels = at::randint(0, config.vocab_size, {total}, at::kLong);
    labels[8] = kIgnoreLabel;
    labels[22] = kIgnoreLabel;
    const at::Tensor positions = at::cat({at::arange(9, at::kLong), at::arange(14, at::kLong)});
    const PackedSequences packed = PackedSequences::from_lengths(lengths);

    const at::Tensor expected = at::cross_entropy_loss(model->forward(tokens, positions, packed), labels, {},
                                                       at::Reduction::Sum, kIgnoreLabel);
    expected.backward();
    std::vector<at::Tensor> expected_grads;
    for (const at::Tensor& w : model->parameters()) {
      expected_grads.push_back(w.grad().clone());
      w.mutable_grad().zero_();
    }
    const at::Tensor got = model->loss_sum(tokens, positions, packed, labels);
    EXPECT_LE(relative_error(got, expected), 1e-6);
    got.backward();
    const auto parameters = model->named_parameters();
    for (size_t i = 0; i < parameters.size(); ++i) {
      EXPECT_LE(relative_error(parameters[i].value().grad(), expected_grads[i]), 1e-5) << parameters[i].key();
    }
    const at::Tensor per_token = model->token_losses(tokens, positions, packed, labels);
    EXPECT_LE(relative_error(per_token.sum(), expected), 1e-6);
  }
}

}  // namespace
}  // namespace sb
