// The manifest's model options reach the model through apply_model_training_options,
// and the trainer built from a LoRA manifest trains the adapters only.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "harness/parallel/parallel_layout.h"
#include "harness/parallel/rank_context.h"
#include "harness/train/model_training_options.h"
#include "harness/train/trainer.h"
#include "kernels/attention/core/attention_backend.h"
#include "models/qwen2/qwen2_lora.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"

namespace sb {
namespace {

Qwen2ForCausalLM make_model() {
  at::manual_seed(51);
  return Qwen2ForCausalLM(qwen2_preset("qwen2-test"), dense_attention_options().make_backend());
}

TEST(ModelTrainingOptions, DefaultsTrainEveryParameterInFp32) {
  Qwen2ForCausalLM model = make_model();
  const auto trainable = apply_model_training_options(model, TrainSection{});
  EXPECT_EQ(trainable.size(), model->parameters().size());
  EXPECT_EQ(model->precision(), Qwen2Precision::kFloat32);
  EXPECT_FALSE(model->activation_checkpointing());
  EXPECT_FALSE(qwen2_has_lora(model));
}

TEST(ModelTrainingOptions, LoraPrecisionAndCheckpointingAreApplied) {
  Qwen2ForCausalLM model = make_model();
  TrainSection train;
  train.precision = Qwen2Precision::kBFloat16Mixed;
  train.activation_checkpointing = true;
  train.lora = LoraSection{32, 64.0, 0.05, {"q_proj", "k_proj", "v_proj", "o_proj"}};
  const auto trainable = apply_model_training_options(model, train);
  EXPECT_EQ(model->precision(), Qwen2Precision::kBFloat16Mixed);
  EXPECT_TRUE(model->activation_checkpointing());
  ASSERT_EQ(trainable.size(), 2u * 4u * 2u);  // A and B, 4 projections, 2 layers
  for (const auto& p : trainable) EXPECT_TRUE(p.requires_grad());
  const Qwen2LoraOptions applied = qwen2_lora_options_of(model);
  EXPECT_EQ(applied.rank, 32);
  EXPECT_DOUBLE_EQ(applied.alpha, 64.0);
  EXPECT_DOUBLE_EQ(applied.dropout, 0.05);
  EXPECT_EQ(applied.target_modules, train.lora->target_modules);
}

RunSpec lora_run() {
  RunSpec run;
  run.name = "lora";
  Manifest& m = run.manifest;
  m.name = "lora-test";
  m.model.preset = "qwen2-test";
  m.model.config = qwen2_preset("qwen2-test");
  m.data.synthetic.vocab_size = 128;
  m.data.synthetic.length_mixture = {LengthComponent{1.0, 12, 24}};
  m.train.iterations = 4;
  m.train.global_batch_size = 4;
  m.train.max_tokens_per_microbatch = 48;
  m.train.lr = 1e-2;
  m.train.lr_schedule = LrSchedule::kConstant;
  m.train.activation_checkpointing = true;
  m.train.lora = LoraSection{4, 8.0, 0.05, {"q_proj", "v_proj", "up_proj"}};
  MethodSection dense;
  dense.name = "dense";
  m.methods = {dense};
  m.baseline = "dense";
  return run;
}

TEST(ModelTrainingOptions, TrainerWithLoraUpdatesAdaptersOnly) {
  const RunSpec run = lora_run();
  const Qwen2Config& config = qwen2_preset(run.manifest.model.preset);
  Trainer trainer(run, RankContext::single_process(ParallelLayout(1, 1, config.num_hidden_layers), c10::kCPU));
  std::map<std::string, at::Tensor> before;
  for (const StageParameter& p : trainer.stage().parameters()) before[p.name] = p.tensor.detach().clone();
  int adapters = 0;
  for (int64_t i = 0; i < 4; ++i) {
    const std::optional<IterationOutcome> outcome = trainer.train_iteration(i);
    ASSERT_TRUE(outcome.has_value());
    EXPECT_TRUE(std::isfinite(outcome->record.loss));
    EXPECT_GT(outcome->record.grad_norm, 0.0);
    if (i >= 1) EXPECT_DOUBLE_EQ(outcome->record.lr, 1e-2);  // constant after one warm-up step
  }
  for (const StageParameter& p : trainer.stage().parameters()) {
    const bool is_adapter = p.name.find(".lora_") != std::string::npos;
    adapters += is_adapter ? 1 : 0;
    EXPECT_EQ(at::equal(p.tensor, before.at(p.name)), !is_adapter) << p.name;
  }
  EXPECT_EQ(adapters, 2 * 3 * config.num_hidden_layers);  // A and B of 3 projections per layer
}

}  // namespace
}  // namespace sb
