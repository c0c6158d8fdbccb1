// LoRA on Qwen2: the adapter layer against a float64 formula (forward and gradients,
// with and without dropout), PEFT's initialisation, zero-initialised B leaves the
// model's outputs bit for bit, only adapter weights train, and the merged and PEFT
// checkpoints hold what the LoRA model computes.

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/optim/adamw.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include <unistd.h>

#include "models/qwen2/qwen2_hf_checkpoint.h"
#include "models/qwen2/qwen2_lora.h"
#include "models/safetensors/safetensors_checkpoint.h"
#include "models/safetensors/safetensors_file.h"
#include "tests/support/qwen2_test_models.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using test::make_test_batch;
using test::make_test_model;
using test::max_abs_diff;

const std::vector<std::string> kAllModules = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                              "gate_proj", "up_proj", "down_proj"};

fs::path fresh_temp_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("sb_lora_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

// A LoRA layer with every weight random (B too, so the adapter path contributes).
Qwen2Linear make_adapted_layer(int64_t in, int64_t out, int64_t rank, double alpha,
                               double dropout) {
  at::manual_seed(11);
  Qwen2Linear layer(in, out, /*bias=*/true);
  layer->add_lora(rank, alpha, dropout);
  c10::NoGradGuard no_grad;
  layer->lora_B->weight.normal_(0.0, 0.3);
  return layer;
}

// y = x W^T + b + (alpha / r) ((x * mask) A^T) B^T and its gradients for the upstream
// gradient g, written out in float64 (mask: the dropout mask with its 1 / (1 - p)).
struct LoraReference {
  at::Tensor y, dx, dA, dB;
};

LoraReference lora_reference(const at::Tensor& x32, const at::Tensor& mask32, const at::Tensor& g32,
                             Qwen2LinearImpl& layer) {
  const auto d = [](const at::Tensor& t) { return t.detach().to(at::kDouble); };
  const at::Tensor x = d(x32), mask = d(mask32), g = d(g32);
  const at::Tensor W = d(layer.weight), b = d(layer.bias);
  const at::Tensor A = d(layer.lora_A->weight), B = d(layer.lora_B->weight);
  const double s = layer.lora_alpha() / static_cast<double>(layer.lora_rank());
  const at::Tensor u = x * mask;         // [N, in]
  const at::Tensor z = at::matmul(u, A.t());  // [N, r]
  LoraReference ref;
  ref.y = at::matmul(x, W.t()) + b + s * at::matmul(z, B.t());
  const at::Tensor gB = at::matmul(g, B);     // [N, r]
  ref.dB = s * at::matmul(g.t(), z);          // [out, r]
  ref.dA = s * at::matmul(gB.t(), u);         // [r, in]
  ref.dx = at::matmul(g, W) + s * at::matmul(gB, A) * mask;  // [N, in]
  return ref;
}

void expect_close(const at::Tensor& actual, const at::Tensor& expected, const char* what) {
  // Float32 results of sums over at most 64 products of O(1) terms: a few float32
  // roundings relative to the magnitude.
  const double scale = std::max(1.0, expected.abs().max().item<double>());
  EXPECT_LT(max_abs_diff(actual, expected), 2e-5 * scale) << what;
}

TEST(Qwen2Lora, LayerMatchesFloat64FormulaWithoutDropout) {
  Qwen2Linear layer = make_adapted_layer(24, 40, 4, 8.0, 0.0);
  at::manual_seed(12);
  const at::Tensor x = at::randn({9, 24}).requires_grad_(true);
  const at::Tensor g = at::randn({9, 40});
  const at::Tensor y = layer->forward(x);
  y.backward(g);
  const LoraReference ref = lora_reference(x, at::ones_like(x), g, *layer);
  expect_close(y, ref.y, "y");
  expect_close(x.grad(), ref.dx, "dx");
  expect_close(layer->lora_A->weight.grad(), ref.dA, "dA");
  expect_close(layer->lora_B->weight.grad(), ref.dB, "dB");
  EXPECT_FALSE(layer->weight.grad().defined());
  EXPECT_FALSE(layer->bias.grad().defined());
}

TEST(Qwen2Lora, DropoutActsOnTheAdapterInputOnly) {
  const double p = 0.3;
  Qwen2Linear layer = make_adapted_layer(24, 40, 4, 8.0, p);
  at::manual_seed(13);
  const at::Tensor x = at::randn({9, 24}).requires_grad_(true);
  const at::Tensor g = at::randn({9, 40});
  // The dropout is the layer's only random draw: the same seed gives the same mask.
  at::manual_seed(14);
  const at::Tensor mask = at::dropout(at::ones_like(x), p, /*train=*/true);
  at::manual_seed(14);
  const at::Tensor y = layer->forward(x);
  y.backward(g);
  const double dropped = mask.eq(0).to(at::kDouble).mean().item<double>();
  EXPECT_GT(dropped, 0.15);  // 216 draws at p = 0.3: the mask really drops
  EXPECT_LT(dropped, 0.45);
  const LoraReference ref = lora_reference(x, mask, g, *layer);
  expect_close(y, ref.y, "y");
  expect_close(x.grad(), ref.dx, "dx");
  expect_close(layer->lora_A->weight.grad(), ref.dA, "dA");
  expect_close(layer->lora_B->weight.grad(), ref.dB, "dB");

  // In eval mode there is no dropout: the formula with an all-ones mask.
  layer->eval();
  c10::NoGradGuard no_grad;
  expect_close(layer->forward(x), lora_reference(x, at::ones_like(x), g, *layer).y, "eval y");
}

// Tensor parallelism: a row-parallel projection holds a column shard of the input and of
// A. With set_input_shard its dropout keeps its columns of the whole input's mask, so two
// shards started from the same generator state drop exactly what the whole layer drops:
// their outputs (partial sums through their A columns) add up to the whole layer's.
TEST(Qwen2Lora, RowParallelShardsKeepTheirColumnsOfTheWholeDropoutMask) {
  const double p = 0.4;
  Qwen2Linear whole = make_adapted_layer(24, 40, 4, 8.0, p);
  at::manual_seed(21);
  const at::Tensor x = at::randn({9, 24});
  at::manual_seed(22);
  const at::Tensor mask = at::dropout(at::ones_like(x), p, /*train=*/true);
  EXPECT_GT(mask.eq(0).sum().item<int64_t>(), 20) << "non-vacuous: the mask drops entries";
  at::manual_seed(22);
  const at::Tensor y = whole->forward(x);
  expect_close(y, lora_reference(x, mask, at::zeros({9, 40}), *whole).y, "whole y");

  at::Tensor sum = at::zeros_like(y);
  for (int64_t shard = 0; shard < 2; ++shard) {
    Qwen2Linear part = make_adapted_layer(12, 40, 4, 8.0, p);
    {
      c10::NoGradGuard no_grad;
      part->weight.copy_(whole->weight.narrow(1, 12 * shard, 12));
      part->lora_A->weight.copy_(whole->lora_A->weight.narrow(1, 12 * shard, 12));
      part->lora_B->weight.copy_(whole->lora_B->weight);
      part->bias.copy_(shard == 0 ? whole->bias : at::zeros_like(whole->bias));  // added once
    }
    part->set_input_shard(shard, 2);
    at::manual_seed(22);  // every TP rank's generator is where the one process's is
    sum = sum + part->forward(x.narrow(1, 12 * shard, 12));
  }
  expect_close(sum, y, "shards' partial sums");
  // Without the shard, each rank would draw its own 9 x 12 mask: not the whole one.
  Qwen2Linear alone = make_adapted_layer(12, 40, 4, 8.0, p);
  {
    c10::NoGradGuard no_grad;
    alone->weight.copy_(whole->weight.narrow(1, 12, 12));
    alone->lora_A->weight.copy_(whole->lora_A->weight.narrow(1, 12, 12));
    alone->lora_B->weight.copy_(whole->lora_B->weight);
  }
  at::manual_seed(22);
  const at::Tensor unsharded = alone->forward(x.narrow(1, 12, 12));
  alone->set_input_shard(1, 2);
  at::manual_seed(22);
  EXPECT_FALSE(at::allclose(unsharded, alone->forward(x.narrow(1, 12, 12))));
  EXPECT_THROW(alone->set_input_shard(2, 2), std::invalid_argument);
  // In eval mode the shard draws nothing and drops nothing.
  alone->eval();
  at::manual_seed(22);
  const at::Tensor before = at::rand({1});
  at::manual_seed(22);
  const at::Tensor evaluated = alone->forward(x.narrow(1, 12, 12));
  EXPECT_TRUE(at::equal(at::rand({1}), before)) << "no draw in eval mode";
  expect_close(evaluated, lora_reference(x.narrow(1, 12, 12), at::ones({9, 12}), at::zeros({9, 40}), *alone).y,
               "eval y");
}

TEST(Qwen2Lora, InitialisationIsPeftsKaimingUniformAndZeroB) {
  at::manual_seed(3);
  Qwen2Linear layer(256, 64, /*bias=*/false);
  layer->add_lora(32, 64.0, 0.05);
  const at::Tensor A = layer->lora_A->weight;
  ASSERT_EQ(A.sizes(), (std::vector<int64_t>{32, 256}));
  ASSERT_EQ(layer->lora_B->weight.sizes(), (std::vector<int64_t>{64, 32}));
  // kaiming_uniform(a = sqrt(5)) on [r, in]: gain sqrt(2 / 6), bound gain * sqrt(3 / in)
  // = 1 / sqrt(in); a uniform variable on [-b, b] has std b / sqrt(3).
  const double bound = 1.0 / std::sqrt(256.0);
  EXPECT_LE(A.abs().max().item<double>(), bound);
  EXPECT_GT(A.abs().max().item<double>(), 0.99 * bound);
  EXPECT_NEAR(A.std().item<double>(), bound / std::sqrt(3.0), 0.02 * bound);
  EXPECT_TRUE(at::equal(layer->lora_B->weight, at::zeros({64, 32})));
  EXPECT_DOUBLE_EQ(layer->lora_scale(), 2.0);
  EXPECT_FALSE(layer->weight.requires_grad());
  EXPECT_TRUE(A.requires_grad());
  EXPECT_THROW(layer->add_lora(4, 8.0, 0.0), std::logic_error);
}

TEST(Qwen2Lora, ZeroInitialisedBGivesExactlyTheBaseModel) {
  for (const char* preset : {"qwen2-test", "qwen2-tiny"}) {
    SCOPED_TRACE(preset);
    Qwen2ForCausalLM model = make_test_model(preset, 4);
    model->train();
    const auto batch = make_test_batch({7, 12}, model->config().vocab_size, 5);
    const at::Tensor base = model->forward(batch.tokens, batch.positions, batch.sequences);
    qwen2_apply_lora(model, {8, 16.0, 0.1, kAllModules});
    const at::Tensor adapted = model->forward(batch.tokens, batch.positions, batch.sequences);
    EXPECT_TRUE(at::equal(base, adapted)) << "max diff " << max_abs_diff(base, adapted);
  }
}

TEST(Qwen2Lora, OnlyAdapterWeightsReceiveGradientsAndTrain) {
  Qwen2ForCausalLM model = make_test_model("qwen2-test", 6);
  model->train();
  const std::vector<at::Tensor> trainable =
      qwen2_apply_lora(model, {4, 8.0, 0.05, {"q_proj", "v_proj", "down_proj"}});
  const int64_t layers = model->config().num_hidden_layers;
  ASSERT_EQ(static_cast<int64_t>(trainable.size()), 2 * 3 * layers);

  std::set<const void*> trainable_ids;
  for (const auto& p : trainable) trainable_ids.insert(p.unsafeGetTensorImpl());
  std::map<std::string, at::Tensor> before;
  for (const auto& item : model->named_parameters()) {
    const bool is_adapter = item.key().find(".lora_") != std::string::npos;
    EXPECT_EQ(item.value().requires_grad(), is_adapter) << item.key();
    EXPECT_EQ(trainable_ids.count(item.value().unsafeGetTensorImpl()) == 1, is_adapter) << item.key();
    before[item.key()] = item.value().detach().clone();
  }

  const auto batch = make_test_batch({16, 9}, 128, 7);
  torch::optim::AdamW optimizer(trainable, torch::optim::AdamWOptions(1e-2));
  std::vector<double> losses;
  for (int step = 0; step < 15; ++step) {
    optimizer.zero_grad();
    const at::Tensor loss = test::summed_loss(model, batch) / 25.0;
    loss.backward();
    for (const auto& item : model->named_parameters()) {
      const bool is_adapter = item.key().find(".lora_") != std::string::npos;
      EXPECT_EQ(item.value().grad().defined(), is_adapter) << item.key();
    }
    optimizer.step();
    losses.push_back(loss.item<double>());
  }
  EXPECT_LT(losses.back(), losses.front() - 0.1) << "adapters alone must reduce the loss";
  for (const auto& item : model->named_parameters()) {
    const bool is_adapter = item.key().find(".lora_") != std::string::npos;
    const bool unchanged = at::equal(item.value(), before.at(item.key()));
    // B starts at zero and moves; frozen weights stay bit for bit.
    EXPECT_EQ(unchanged, !is_adapter) << item.key();
  }
}

// A model whose adapters hold random weights (as after training).
Qwen2ForCausalLM make_trained_lora_model(const Qwen2LoraOptions& options) {
  Qwen2ForCausalLM model = make_test_model("qwen2-test", 8);
  qwen2_apply_lora(model, options);
  c10::NoGradGuard no_grad;
  for (const auto& item : model->named_parameters()) {
    if (item.key().find(".lora_B.") != std::string::npos) item.value().normal_(0.0, 0.05);
  }
  model->eval();
  return model;
}

TEST(Qwen2Lora, MergedCheckpointReloadsToTheSameLogits) {
  const Qwen2LoraOptions options{4, 8.0, 0.05, {"q_proj", "k_proj", "o_proj", "up_proj"}};
  Qwen2ForCausalLM model = make_trained_lora_model(options);
  const auto batch = make_test_batch({6, 10}, 128, 9);
  c10::NoGradGuard no_grad;
  const at::Tensor logits = model->forward(batch.tokens, batch.positions, batch.sequences);

  const fs::path dir = fresh_temp_dir("merged");
  qwen2_save_hf_checkpoint(model, dir);
  Qwen2ForCausalLM reloaded = qwen2_load_hf_model(dir, dense_attention_options().make_backend());
  EXPECT_FALSE(qwen2_has_lora(reloaded));
  const at::Tensor merged = reloaded->forward(batch.tokens, batch.positions, batch.sequences);
  // Unmerged (x W^T + s x A^T B^T) and merged (x (W + s B A)^T) differ by float32
  // rounding only; the adapters' contribution itself is far larger.
  EXPECT_LT(max_abs_diff(merged, logits), 1e-5);
  Qwen2ForCausalLM base = make_test_model("qwen2-test", 8);
  base->eval();
  EXPECT_GT(max_abs_diff(base->forward(batch.tokens, batch.positions, batch.sequences), logits), 1e-3);

  // The stored weight is W + (alpha / r) B A (checked in float64).
  const auto checkpoint = SafetensorsCheckpoint::open(dir);
  const auto& q = model->layers->ptr<Qwen2DecoderLayerImpl>(1)->self_attn->q_proj;
  const at::Tensor expected = q->weight.to(at::kDouble) +
                              2.0 * at::matmul(q->lora_B->weight.to(at::kDouble),
                                               q->lora_A->weight.to(at::kDouble));
  EXPECT_LT(max_abs_diff(checkpoint.tensor("model.layers.1.self_attn.q_proj.weight"), expected), 1e-7);
  EXPECT_THROW(qwen2_save_hf_checkpoint(model, dir), std::runtime_error);  // never overwrites
  fs::remove_all(dir);
}

TEST(Qwen2Lora, AdapterIsSavedInPeftLayout) {
  const Qwen2LoraOptions options{4, 8.0, 0.05, {"q_proj", "v_proj", "gate_proj"}};
  Qwen2ForCausalLM model = make_trained_lora_model(options);
  const fs::path dir = fresh_temp_dir("adapter");
  qwen2_save_lora_adapter(model, dir, "Qwen/Qwen2.5-3B");
  EXPECT_FALSE(fs::exists(dir.string() + ".partial." + std::to_string(::getpid())));

  std::ifstream config_file(dir / "adapter_config.json");
  const nlohmann::json config = nlohmann::json::parse(config_file);
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["task_type"], "CAUSAL_LM");
  EXPECT_EQ(config["r"], 4);
  EXPECT_EQ(config["lora_alpha"], 8.0);
  EXPECT_EQ(config["lora_dropout"], 0.05);
  EXPECT_EQ(config["bias"], "none");
  EXPECT_EQ(config["base_model_name_or_path"], "Qwen/Qwen2.5-3B");
  EXPECT_EQ(config["target_modules"], nlohmann::json({"q_proj", "v_proj", "gate_proj"}));

  const auto checkpoint = SafetensorsFile::open(dir / "adapter_model.safetensors");
  std::set<std::string> expected;
  for (int64_t layer = 0; layer < model->config().num_hidden_layers; ++layer) {
    const std::string prefix = "base_model.model.model.layers." + std::to_string(layer) + ".";
    for (const char* module : {"self_attn.q_proj", "self_attn.v_proj", "mlp.gate_proj"}) {
      expected.insert(prefix + module + ".lora_A.weight");
      expected.insert(prefix + module + ".lora_B.weight");
    }
  }
  const auto names = checkpoint.names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), expected);
  const auto& gate = model->layers->ptr<Qwen2DecoderLayerImpl>(0)->mlp->gate_proj;
  EXPECT_TRUE(at::equal(checkpoint.tensor("base_model.model.model.layers.0.mlp.gate_proj.lora_B.weight"),
                        gate->lora_B->weight));
  EXPECT_EQ(checkpoint.tensor("base_model.model.model.layers.0.mlp.gate_proj.lora_A.weight").sizes(),
            (std::vector<int64_t>{4, model->config().hidden_size}));
  fs::remove_all(dir);
}

TEST(Qwen2Lora, OptionsAreValidatedWithClearErrors) {
  const auto message_of = [](const Qwen2LoraOptions& options) -> std::string {
    try {
      qwen2_validate_lora_options(options);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message_of({0, 8.0, 0.0, {"q_proj"}}).find("rank"), std::string::npos);
  EXPECT_NE(message_of({4, 0.0, 0.0, {"q_proj"}}).find("alpha"), std::string::npos);
  EXPECT_NE(message_of({4, 8.0, 1.0, {"q_proj"}}).find("dropout"), std::string::npos);
  EXPECT_NE(message_of({4, 8.0, 0.0, {}}).find("target_modules"), std::string::npos);
  const std::string unknown = message_of({4, 8.0, 0.0, {"qkv_proj"}});
  EXPECT_NE(unknown.find("qkv_proj"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("down_proj"), std::string::npos) << unknown;  // lists the known names
  EXPECT_NE(message_of({4, 8.0, 0.0, {"q_proj", "q_proj"}}).find("twice"), std::string::npos);
  EXPECT_EQ(message_of({32, 64.0, 0.05, kAllModules}), "");
}

TEST(Qwen2Lora, LoadingBaseWeightsIntoAnAdaptedModelIsRefused) {
  Qwen2ForCausalLM model = make_trained_lora_model({4, 8.0, 0.0, {"q_proj"}});
  const fs::path dir = fresh_temp_dir("refuse");
  qwen2_save_hf_checkpoint(model, dir);
  EXPECT_THROW(qwen2_load_hf_weights(model, SafetensorsCheckpoint::open(dir)), std::logic_error);
  EXPECT_THROW(qwen2_apply_lora(model, {4, 8.0, 0.0, {"k_proj"}}), std::logic_error);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sb
