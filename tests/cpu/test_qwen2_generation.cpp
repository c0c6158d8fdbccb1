// Incremental decoding: the key/value-cache path must give the logits of a full
// forward over the whole sequence, and greedy generation must pick the tokens a
// cache-free argmax loop picks.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "kernels/attention/core/attention_backend.h"
#include "models/qwen2/qwen2_generate.h"
#include "models/qwen2/qwen2_model.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"

namespace sb {
namespace {

Qwen2ForCausalLM make_model(const std::string& preset, uint64_t seed) {
  at::manual_seed(seed);
  Qwen2ForCausalLM model(qwen2_preset(preset), dense_attention_options().make_backend());
  model->eval();
  return model;
}

at::Tensor full_forward(Qwen2ForCausalLM& model, const std::vector<int64_t>& ids) {
  const int64_t n = static_cast<int64_t>(ids.size());
  return model->forward(at::tensor(ids, at::kLong), at::arange(n, at::kLong),
                        PackedSequences::from_lengths({n}));  // [n, V]
}

TEST(Qwen2KVCache, PrefillThenStepsMatchAFullForward) {
  c10::NoGradGuard no_grad;
  for (const char* preset : {"qwen2-test", "qwen2-tiny"}) {
    SCOPED_TRACE(preset);
    Qwen2ForCausalLM model = make_model(preset, 3);
    const std::vector<int64_t> ids = {5, 17, 3, 99, 42, 8, 1, 64, 23, 7};
    const at::Tensor reference = full_forward(model, ids);  // [10, V]
    Qwen2KVCache cache;
    // Prefill 4 tokens, then 3 single steps, then a chunk of 3.
    std::vector<at::Tensor> pieces;
    pieces.push_back(model->forward_cached(at::tensor(std::vector<int64_t>(ids.begin(), ids.begin() + 4), at::kLong), cache));
    for (int i = 4; i < 7; ++i) pieces.push_back(model->forward_cached(at::full({1}, ids[i], at::kLong), cache));
    pieces.push_back(model->forward_cached(at::tensor(std::vector<int64_t>(ids.begin() + 7, ids.end()), at::kLong), cache));
    EXPECT_EQ(cache.length(), 10);
    const at::Tensor incremental = at::cat(pieces, 0);
    EXPECT_TRUE(at::allclose(incremental, reference, /*rtol=*/1e-4, /*atol=*/1e-5))
        << (incremental - reference).abs().max().item<double>();
    // last_only: the whole prompt at once, only its last token's logits.
    Qwen2KVCache fresh;
    const at::Tensor last = model->forward_cached(at::tensor(ids, at::kLong), fresh, /*last_only=*/true);
    ASSERT_EQ(last.size(0), 1);
    EXPECT_TRUE(at::allclose(last[0], reference[-1], /*rtol=*/1e-4, /*atol=*/1e-5));
  }
}

TEST(Qwen2Generate, GreedyMatchesACacheFreeArgmaxLoop) {
  Qwen2ForCausalLM model = make_model("qwen2-test", 11);
  const std::vector<int64_t> prompt = {1, 2, 3, 4, 5};
  const std::vector<int64_t> generated = qwen2_generate_greedy(model, prompt, GreedyOptions{20, {}});
  ASSERT_EQ(generated.size(), 20u);
  c10::NoGradGuard no_grad;
  std::vector<int64_t> ids = prompt;
  for (int step = 0; step < 20; ++step) {
    const int64_t next = full_forward(model, ids)[-1].argmax().item<int64_t>();
    EXPECT_EQ(generated[step], next) << "step " << step;
    ids.push_back(next);
  }
}

TEST(Qwen2Generate, StopsOnAStopTokenAndKeepsIt) {
  Qwen2ForCausalLM model = make_model("qwen2-test", 11);
  const std::vector<int64_t> free_run = qwen2_generate_greedy(model, {1, 2, 3}, GreedyOptions{12, {}});
  const int64_t stop = free_run[3];
  const auto first = std::find(free_run.begin(), free_run.end(), stop);
  const std::vector<int64_t> stopped = qwen2_generate_greedy(model, {1, 2, 3}, GreedyOptions{12, {stop}});
  EXPECT_EQ(stopped, std::vector<int64_t>(free_run.begin(), first + 1));
}

TEST(Qwen2Generate, RejectsEmptyPromptsAndOverlongRequests) {
  Qwen2ForCausalLM model = make_model("qwen2-test", 1);
  EXPECT_THROW(qwen2_generate_greedy(model, {}, GreedyOptions{3, {}}), std::invalid_argument);
  EXPECT_THROW(qwen2_generate_greedy(model, {1}, GreedyOptions{5000, {}}), std::invalid_argument);
}

TEST(DenseAttentionCached, MatchesTheLastRowsOfFullCausalAttention) {
  at::manual_seed(0);
  auto backend = dense_attention_options().make_backend();
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor q = at::randn({9, 6, 4}, opts), k = at::randn({9, 2, 4}, opts),
                   v = at::randn({9, 2, 4}, opts);
  const at::Tensor full = backend->forward(q, k, v, PackedSequences::from_lengths({9}), 0.5, 0);
  const at::Tensor tail = backend->forward_cached(q.narrow(0, 6, 3), k, v, 0.5);
  EXPECT_TRUE(at::allclose(tail, full.narrow(0, 6, 3), 1e-12, 1e-12));
  EXPECT_THROW(backend->forward_cached(q, k.narrow(0, 0, 4), v.narrow(0, 0, 4), 0.5), c10::Error);
}

}  // namespace
}  // namespace sb
