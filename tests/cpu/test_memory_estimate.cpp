// The per-rank memory estimate (harness/train/memory_estimate.h) against what the model
// itself holds: its parameter count, the adapters LoRA trains, the shards a TP rank
// keeps, the stages' split; and the activation terms of docs/memory.md. The estimate
// against measured peaks of real runs: MemoryPeaks (tests/dist/test_memory_peaks.cpp)
// and docs/memory.md.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "harness/config/manifest.h"
#include "harness/parallel/tensor_parallel/tensor_parallel_sharding.h"
#include "harness/train/memory_estimate.h"
#include "harness/train/model_training_options.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"
#include "models/qwen2/qwen2_model.h"

namespace sb {
namespace {

using nlohmann::json;

Manifest manifest_of(const std::string& preset, const json& train = json::object(), const json& parallelism = json::object()) {
  json j = {{"name", "memory"},
            {"model", {{"preset", preset}}},
            {"data", {{"synthetic", {{"length_mixture", {{{"min_tokens", 16}, {"max_tokens", 64}}}}}}}},
            {"train", {{"iterations", 1}, {"warmup_iterations", 0}, {"max_tokens_per_microbatch", 64}}},
            {"methods", {{{"name", "dense"}}}}};
  j["train"].update(train);
  if (!parallelism.empty()) j["parallelism"] = parallelism;
  return parse_manifest(j, "<test>");
}

double model_numel(Qwen2ForCausalLM& model) {
  double n = 0;
  for (const at::Tensor& p : model->parameters()) n += static_cast<double>(p.numel());
  return n;
}

TEST(MemoryEstimate, FullFineTuningHoldsSixteenBytesPerParameter) {
  const Manifest m = manifest_of("qwen2-test");
  Qwen2ForCausalLM model(m.model.config, dense_attention_options().make_backend());
  const StageMemoryEstimate e = estimate_rank_memory(m, MemoryTarget::kHostProcess).stages.at(0);
  EXPECT_DOUBLE_EQ(e.weights, 4 * model_numel(model));
  EXPECT_DOUBLE_EQ(e.gradients, e.weights);
  EXPECT_DOUBLE_EQ(e.optimizer, 2 * e.gradients);
  EXPECT_EQ(e.weight_casts, 0.0);
  EXPECT_EQ(e.microbatches_in_flight, 1);
}

TEST(MemoryEstimate, LoraTrainsWhatTheModelMarksTrainable) {
  const Manifest m = manifest_of("qwen2-test", {{"lora", {{"rank", 4}, {"alpha", 8.0},
                                                          {"target_modules", {"q_proj", "v_proj", "down_proj"}}}}});
  Qwen2ForCausalLM model(m.model.config, dense_attention_options().make_backend());
  double trained = 0;
  for (const at::Tensor& t : apply_model_training_options(model, m.train)) trained += static_cast<double>(t.numel());
  const StageMemoryEstimate e = estimate_rank_memory(m, MemoryTarget::kHostProcess).stages.at(0);
  EXPECT_DOUBLE_EQ(e.gradients, 4 * trained);
  EXPECT_DOUBLE_EQ(e.optimizer, 8 * trained);
}

TEST(MemoryEstimate, TensorParallelRankHoldsItsShards) {
  const Manifest m = manifest_of("qwen2-test-kv4", json::object(), {{"tp", 2}});
  Qwen2ForCausalLM model(m.model.config, dense_attention_options().make_backend());
  double shard = 0;
  for (const auto& p : model->named_parameters()) {
    shard += static_cast<double>(tensor_parallel_shard(p.key(), p.value(), 2, 0).numel());
  }
  // The vocabulary of 125 splits 63 / 62: rank 0 holds the larger share, the estimate the mean.
  const double vocab_rounding = m.model.config.hidden_size * 0.5;
  EXPECT_NEAR(estimate_rank_memory(m, MemoryTarget::kHostProcess).stages.at(0).weights / 4, shard, vocab_rounding + 1e-9);
}

TEST(MemoryEstimate, PipelineStagesSplitTheLayersAndHoldTheirMicroBatchesInFlight) {
  const Manifest m = manifest_of("qwen2-tiny", json::object(), {{"pp", 2}});  // tied: the last stage holds a copy of the embedding
  const Qwen2Config& c = m.model.config;
  Qwen2ForCausalLM model(c, dense_attention_options().make_backend());
  const MemoryEstimate e = estimate_rank_memory(m, MemoryTarget::kHostProcess);
  ASSERT_EQ(e.stages.size(), 2u);
  EXPECT_DOUBLE_EQ(e.stages[0].weights + e.stages[1].weights,
                   4 * (model_numel(model) + static_cast<double>(c.vocab_size * c.hidden_size)));
  EXPECT_EQ(e.stages[0].microbatches_in_flight, 2);
  EXPECT_EQ(e.stages[1].microbatches_in_flight, 1);
  EXPECT_GT(e.stages[1].loss, 0.0);
  EXPECT_EQ(e.stages[0].loss, 0.0);
}

// docs/memory.md's terms by hand for qwen2-test (H 32, 4 query heads and 2 key/value
// heads of 8, I 64) at 64 tokens, float32: the stream x, two normalised rows and h
// (4 [T, H]), two projection inputs [T, H], q, k, v, the output and its copy
// (3 x 32 + 2 x 16 columns), the log-sum-exp (4 heads), the MLP's four [T, I].
TEST(MemoryEstimate, ActivationsPerLayerAreTheDocumentedTerms) {
  const double t = 64;
  const double expected = 4 * 32 * t * 4 + 2 * 4 * 32 * t + 4 * t * (3 * 32 + 2 * 16) + 4 * t * 4 + 4 * 4 * t * 64;
  EXPECT_DOUBLE_EQ(estimate_rank_memory(manifest_of("qwen2-test"), MemoryTarget::kHostProcess).stages[0].activations_per_layer, expected);
  // bfloat16 halves every matmul operand; the stream and the statistics stay float32.
  const double bf16 = 4 * 32 * t * 4 + 2 * 2 * 32 * t + 2 * t * (3 * 32 + 2 * 16) + 4 * t * 4 + 4 * 2 * t * 64;
  const StageMemoryEstimate mixed =
      estimate_rank_memory(manifest_of("qwen2-test", {{"precision", "bf16-mixed"}}), MemoryTarget::kHostProcess).stages[0];
  EXPECT_DOUBLE_EQ(mixed.activations_per_layer, bf16);
  EXPECT_GT(mixed.weight_casts, 0.0);
}

TEST(MemoryEstimate, CheckpointingKeepsLayerInputsAndOneLayer) {
  const Manifest plain = manifest_of("qwen2-tiny", {{"max_tokens_per_microbatch", 512}});
  const Manifest checkpointed =
      manifest_of("qwen2-tiny", {{"max_tokens_per_microbatch", 512}, {"activation_checkpointing", true}});
  const StageMemoryEstimate a = estimate_rank_memory(plain, MemoryTarget::kHostProcess).stages[0];
  const StageMemoryEstimate b = estimate_rank_memory(checkpointed, MemoryTarget::kHostProcess).stages[0];
  const double layers = 4, inputs = 4.0 * 128 * 512, rope = 2 * 4.0 * 512 * 32, final_norm = 3 * 4.0 * 128 * 512;
  EXPECT_DOUBLE_EQ(a.activations, layers * a.activations_per_layer + rope + final_norm);
  EXPECT_DOUBLE_EQ(b.activations, layers * inputs + rope + a.activations_per_layer + final_norm);
  // In a host process, glibc's retained blocks: a quarter of the activations
  // (docs/memory.md); none on a device (a GPU, a simulated cluster), nor a runtime term.
  EXPECT_DOUBLE_EQ(a.allocator, 0.25 * a.activations);
  const StageMemoryEstimate device = estimate_rank_memory(plain, MemoryTarget::kDevice, 1e9).stages[0];
  EXPECT_EQ(device.allocator, 0.0);
  EXPECT_EQ(device.runtime, 0.0);
  EXPECT_DOUBLE_EQ(device.total(), a.total() - a.allocator);
  // Twice the tokens, twice the activations (no checkpointing).
  const Manifest longer = manifest_of("qwen2-tiny", {{"max_tokens_per_microbatch", 1024}});
  EXPECT_DOUBLE_EQ(estimate_rank_memory(longer, MemoryTarget::kHostProcess).stages[0].activations, 2 * a.activations);
}

TEST(MemoryEstimate, TheConsoleLineNamesTheTerms) {
  const std::string text = describe_memory_estimate(estimate_rank_memory(manifest_of("qwen2-tiny", json::object(), {{"pp", 2}}), MemoryTarget::kHostProcess, 1e9),
                                                    "cpu");
  EXPECT_NE(text.find("64-token micro-batch, cpu"), std::string::npos) << text;
  EXPECT_NE(text.find("stage 0: "), std::string::npos) << text;
  EXPECT_NE(text.find("2 micro-batches in flight"), std::string::npos) << text;
  EXPECT_NE(text.find("runtime 0.93"), std::string::npos) << text;
}

}  // namespace
}  // namespace sb
