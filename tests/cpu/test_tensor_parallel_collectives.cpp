// Tensor parallelism's pieces against their unsharded forms, forward and backward, with
// real Gloo groups: each TP rank is a thread of this process, the ranks meet over an
// in-process store. float64 throughout, so the comparisons are tight.
//   - sequence parallelism: the all-gather into a layer and the reduce-scatter out of it
//     (token counts that do not divide by tp, so the padding rows are exercised)
//   - the vocabulary-parallel embedding (a vocabulary that does not divide by tp); the
//     vocabulary-parallel loss is tested with the fused head (test_qwen2_head_loss.cpp)
//   - which dimension each parameter splits along
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <vector>

#include "harness/parallel/process_group.h"
#include "harness/parallel/tensor_parallel/sequence_parallel_collectives.h"
#include "harness/parallel/tensor_parallel/tensor_parallel_sharding.h"
#include "harness/parallel/tensor_parallel/vocab_parallel.h"
#include "tests/support/tensor_parallel_threads.h"

namespace sb {
namespace {

using test::run_tp_ranks;

void expect_close(const at::Tensor& actual, const at::Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  EXPECT_LE((actual - expected).abs().max().item<double>(), 1e-12) << what;
}

// Rank r's rows of x [T, ...] padded to tp * ceil(T / tp) rows.
at::Tensor rows_of(const at::Tensor& x, int64_t tp, int64_t r) {
  const at::Tensor padded = pad_rows_to_multiple(x, tp);
  const int64_t rows = padded.size(0) / tp;
  return padded.narrow(0, r * rows, rows).clone();
}

TEST(SequenceParallel, GatherAndScatterMatchTheUnshardedStreamForwardAndBackward) {
  for (const int64_t tp : {2, 3}) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    const int64_t tokens = 7, hidden = 5;  // 7 rows: padding on the last rank(s)
    at::manual_seed(3);
    const at::Tensor stream = at::randn({tokens, hidden}, at::kDouble);
    const at::Tensor gather_weights = at::randn({tp, tokens, hidden}, at::kDouble);   // each rank's loss weights
    const at::Tensor partials = at::randn({tp, tokens, hidden}, at::kDouble);         // each rank's partial sums
    const int64_t rows = (tokens + tp - 1) / tp;
    const at::Tensor scatter_weights = at::randn({tp * rows, hidden}, at::kDouble);   // rank r uses its rows
    run_tp_ranks(tp, [&](std::shared_ptr<TensorParallelGroup> group) {
      const int64_t r = group->rank();
      C10dSequenceParallel sp(group);
      // gather: every rank sees the whole stream; the gradient of its rows is the sum of
      // every rank's gradient of those rows (zero on the padding).
      const at::Tensor mine = rows_of(stream, tp, r).requires_grad_(true);
      const at::Tensor gathered = sp.gather(mine, tokens);
      expect_close(gathered, stream, "gathered stream");
      (gathered * gather_weights[r]).sum().backward();
      expect_close(mine.grad(), rows_of(gather_weights.sum(0), tp, r), "gather backward");
      // scatter: this rank's rows of the sum of the partials; each partial's gradient is
      // every rank's gradient rows put together (padding dropped).
      const at::Tensor partial = partials[r].clone().requires_grad_(true);
      const at::Tensor summed = sp.scatter(partial);
      expect_close(summed, rows_of(partials.sum(0), tp, r), "scattered sums");
      (summed * scatter_weights.narrow(0, r * rows, rows)).sum().backward();
      expect_close(partial.grad(), scatter_weights.narrow(0, 0, tokens), "scatter backward");
    });
  }
}

TEST(VocabParallel, SplitRangeCoversEveryRowOnce) {
  EXPECT_EQ(split_range(11, 3, 0).start, 0);
  EXPECT_EQ(split_range(11, 3, 0).end, 3);   // floor(11 / 3)
  EXPECT_EQ(split_range(11, 3, 1).end, 7);   // floor(22 / 3)
  EXPECT_EQ(split_range(11, 3, 2).end, 11);
  EXPECT_EQ(split_range(151936, 8, 7).size(), 18992);  // Qwen2.5's vocabulary divides by 8
  EXPECT_THROW(split_range(2, 3, 0), std::invalid_argument);
}

TEST(VocabParallel, EmbeddingShardsSumToTheEmbeddingForwardAndBackward) {
  const int64_t tp = 3, vocab = 11, hidden = 4;
  at::manual_seed(9);
  const at::Tensor weight = at::randn({vocab, hidden}, at::kDouble).requires_grad_(true);
  const at::Tensor ids = at::tensor({0, 10, 3, 3, 7, 6, 2}, at::kLong);
  const at::Tensor upstream = at::randn({ids.size(0), hidden}, at::kDouble);
  const at::Tensor reference = at::embedding(weight, ids);
  (reference * upstream).sum().backward();
  run_tp_ranks(tp, [&](std::shared_ptr<TensorParallelGroup> group_ptr) {
    TensorParallelGroup& group = *group_ptr;
    const ShardRange shard = split_range(vocab, tp, group.rank());
    const at::Tensor mine = weight.detach().narrow(0, shard.start, shard.size()).clone().requires_grad_(true);
    const at::Tensor partial = vocab_parallel_embedding(ids, mine, shard);
    at::Tensor summed = partial.detach().clone();
    group.all_reduce(summed);
    expect_close(summed, reference.detach(), "embedding summed over ranks");
    (partial * upstream).sum().backward();
    expect_close(mine.grad(), weight.grad().narrow(0, shard.start, shard.size()), "embedding weight gradient");
  });
}

TEST(TensorParallelSharding, SplitDimensionsFollowMegatronsLayout) {
  for (const char* column : {"layers.0.self_attn.q_proj.weight", "layers.3.self_attn.k_proj.bias",
                             "layers.1.self_attn.v_proj.lora_B.weight", "layers.0.mlp.gate_proj.weight",
                             "layers.2.mlp.up_proj.lora_B.weight", "embed_tokens.weight", "lm_head.weight"}) {
    EXPECT_EQ(tensor_parallel_split_dim(column), 0) << column;
  }
  for (const char* row : {"layers.0.self_attn.o_proj.weight", "layers.0.mlp.down_proj.weight",
                          "layers.0.mlp.down_proj.lora_A.weight"}) {
    EXPECT_EQ(tensor_parallel_split_dim(row), 1) << row;
  }
  for (const char* whole : {"layers.0.input_layernorm.weight", "norm.weight", "layers.0.self_attn.q_proj.lora_A.weight",
                            "layers.0.self_attn.o_proj.lora_B.weight"}) {
    EXPECT_EQ(tensor_parallel_split_dim(whole), -1) << whole;
  }
  const at::Tensor q = at::arange(24, at::kDouble).view({6, 4});  // 3 heads of dim 2 over 3 ranks... by rows
  EXPECT_TRUE(at::equal(tensor_parallel_shard("layers.0.self_attn.q_proj.weight", q, 3, 1), q.narrow(0, 2, 2)));
  EXPECT_TRUE(at::equal(tensor_parallel_shard("layers.0.self_attn.o_proj.weight", q, 2, 1), q.narrow(1, 2, 2)));
  EXPECT_TRUE(at::equal(tensor_parallel_shard("norm.weight", q, 2, 1), q));
}

}  // namespace
}  // namespace sb
