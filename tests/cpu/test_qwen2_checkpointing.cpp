// Per-layer activation checkpointing: gradients equal those of the plain model (full
// fine-tuning, LoRA with dropout, bf16-mixed), the layers really run again in the
// backward pass with their own layer index, and the random stream after a step does
// not depend on checkpointing.

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function.h>

#include <algorithm>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "models/qwen2/qwen2_lora.h"
#include "tests/support/qwen2_test_models.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"

namespace sb {
namespace {

using test::make_test_batch;
using test::make_test_model;
using test::max_abs_diff;

// The dense backend, recording the layer index of every forward call.
class RecordingBackend : public AttentionBackend {
 public:
  std::string name() const override { return "recording-dense"; }
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const PackedSequences& sequences, double scale, int64_t layer) override {
    layers.push_back(layer);
    return dense_->forward(q, k, v, sequences, scale, layer);
  }
  at::Tensor forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double scale) override {
    return dense_->forward_cached(q, k, v, scale);
  }
  std::vector<int64_t> layers;

 private:
  std::unique_ptr<AttentionBackend> dense_ = dense_attention_options().make_backend();
};

struct StepResult {
  double loss = 0;
  std::map<std::string, at::Tensor> grads;  // parameters that received one
  double random_after = 0;                  // a draw from the global generator after backward
};

struct StepSetup {
  bool lora = false;
  double dropout = 0.0;
  Qwen2Precision precision = Qwen2Precision::kFloat32;
};

StepResult run_step(const StepSetup& setup, bool checkpointing) {
  Qwen2ForCausalLM model = make_test_model("qwen2-test", 21);
  if (setup.lora) {
    qwen2_apply_lora(model, {4, 8.0, setup.dropout, {"q_proj", "v_proj", "o_proj", "down_proj"}});
    c10::NoGradGuard no_grad;
    for (const auto& item : model->named_parameters()) {
      if (item.key().find(".lora_B.") != std::string::npos) item.value().normal_(0.0, 0.05);
    }
  }
  model->train();
  model->set_precision(setup.precision);
  model->set_activation_checkpointing(checkpointing);
  const auto batch = make_test_batch({13, 6, 20}, 128, 22);
  at::manual_seed(23);  // the dropout masks start from the same generator state
  const at::Tensor loss = test::summed_loss(model, batch) / 39.0;
  loss.backward();
  StepResult result;
  result.loss = loss.item<double>();
  for (const auto& item : model->named_parameters()) {
    if (item.value().grad().defined()) result.grads[item.key()] = item.value().grad().clone();
  }
  result.random_after = at::rand({1}, at::kDouble).item<double>();
  return result;
}

// Checkpointing recomputes the same float operations in the same order, so gradients
// agree to the last bit or nearly: 1e-6 relative to each gradient's largest entry
// leaves room only for a different summation order inside a library kernel.
constexpr double kGradientRtol = 1e-6;

double relative_difference(const at::Tensor& a, const at::Tensor& b) {
  return max_abs_diff(a, b) / std::max(b.abs().max().item<double>(), 1e-12);
}

// The largest relative difference over the gradients both runs have.
double largest_relative_difference(const StepResult& a, const StepResult& b) {
  double largest = 0;
  for (const auto& [name, grad] : a.grads) {
    largest = std::max(largest, relative_difference(b.grads.at(name), grad));
  }
  return largest;
}

void expect_same_gradients(const StepResult& plain, const StepResult& checkpointed) {
  EXPECT_EQ(plain.loss, checkpointed.loss);
  ASSERT_EQ(plain.grads.size(), checkpointed.grads.size());
  for (const auto& [name, grad] : plain.grads) {
    const auto it = checkpointed.grads.find(name);
    ASSERT_NE(it, checkpointed.grads.end()) << name;
    EXPECT_LE(relative_difference(it->second, grad), kGradientRtol) << name;
  }
  EXPECT_EQ(plain.random_after, checkpointed.random_after)
      << "the recomputation must leave the global generator where the plain run leaves it";
}

TEST(Qwen2Checkpointing, FullFineTuningGradientsEqualThePlainModel) {
  const StepResult plain = run_step({}, false);
  const StepResult checkpointed = run_step({}, true);
  EXPECT_GT(plain.grads.size(), 20u);  // every parameter
  expect_same_gradients(plain, checkpointed);
}

TEST(Qwen2Checkpointing, LoraWithDropoutRecomputesTheSameMasks) {
  const StepSetup setup{true, 0.2, Qwen2Precision::kFloat32};
  const StepResult plain = run_step(setup, false);
  const StepResult checkpointed = run_step(setup, true);
  EXPECT_EQ(plain.grads.size(), 2u * 4u * 2u);  // A and B, 4 modules, 2 layers
  expect_same_gradients(plain, checkpointed);
  // The dropout is active: other masks would move the gradients far beyond the tolerance.
  const StepResult no_dropout = run_step({true, 0.0, Qwen2Precision::kFloat32}, false);
  EXPECT_GT(largest_relative_difference(plain, no_dropout), 1000 * kGradientRtol);
}

TEST(Qwen2Checkpointing, Bf16MixedRecomputesUnderTheSameAutocast) {
  const StepSetup setup{true, 0.1, Qwen2Precision::kBFloat16Mixed};
  const StepResult plain = run_step(setup, false);
  const StepResult checkpointed = run_step(setup, true);
  expect_same_gradients(plain, checkpointed);
  // backward() ran outside the forward's autocast region; a recomputation in float32
  // would be off by bf16's precision, far beyond the tolerance.
  const StepResult fp32 = run_step({true, 0.1, Qwen2Precision::kFloat32}, false);
  EXPECT_GT(largest_relative_difference(plain, fp32), 1000 * kGradientRtol);
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
}

TEST(Qwen2Checkpointing, LayersRunAgainInBackwardWithTheirIndex) {
  at::manual_seed(24);
  auto backend = std::make_shared<RecordingBackend>();
  Qwen2ForCausalLM model(qwen2_preset("qwen2-test"), backend);
  model->set_activation_checkpointing(true);
  const auto batch = make_test_batch({5, 8}, 128, 25);
  const at::Tensor loss = test::summed_loss(model, batch);
  EXPECT_EQ(backend->layers, (std::vector<int64_t>{0, 1}));
  loss.backward();
  EXPECT_EQ(backend->layers, (std::vector<int64_t>{0, 1, 1, 0}));  // recomputed last-first

  // Without grad there is nothing to recompute: the layers run once, unchanged output.
  backend->layers.clear();
  c10::NoGradGuard no_grad;
  const at::Tensor checkpointed = model->forward(batch.tokens, batch.positions, batch.sequences);
  model->set_activation_checkpointing(false);
  const at::Tensor plain = model->forward(batch.tokens, batch.positions, batch.sequences);
  EXPECT_EQ(backend->layers, (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_TRUE(at::equal(checkpointed, plain));
}

// Names of every node of the autograd graph behind `root`.
std::multiset<std::string> graph_node_names(const at::Tensor& root) {
  std::multiset<std::string> names;
  std::set<const torch::autograd::Node*> seen;
  std::vector<std::shared_ptr<torch::autograd::Node>> stack{root.grad_fn()};
  while (!stack.empty()) {
    const auto node = stack.back();
    stack.pop_back();
    if (!node || !seen.insert(node.get()).second) continue;
    names.insert(node->name());
    for (const auto& edge : node->next_edges()) stack.push_back(edge.function);
  }
  return names;
}

TEST(Qwen2Checkpointing, GraphKeepsNoLayerInternals) {
  // A layer's internals (matmuls, attention, SiLU, norms) hold the activations; with
  // checkpointing the graph has one node per layer in their place.
  Qwen2ForCausalLM model = make_test_model("qwen2-test", 28);
  const auto batch = make_test_batch({10}, 128, 29);
  const auto plain = graph_node_names(test::summed_loss(model, batch));
  model->set_activation_checkpointing(true);
  const auto checkpointed = graph_node_names(test::summed_loss(model, batch));
  EXPECT_EQ(checkpointed.count("Qwen2CheckpointedLayerBackward"), 2u);
  EXPECT_EQ(plain.count("Qwen2CheckpointedLayerBackward"), 0u);
  EXPECT_GT(plain.count("SiluBackward0"), 0u);
  EXPECT_EQ(checkpointed.count("SiluBackward0"), 0u);
  // What remains: embedding, final norm, head and loss, plus the leaves' accumulators.
  EXPECT_LT(checkpointed.size() * 3, plain.size());
}

TEST(Qwen2Checkpointing, RetainedGraphCanBeDifferentiatedTwice) {
  Qwen2ForCausalLM model = make_test_model("qwen2-test", 26);
  model->set_activation_checkpointing(true);
  const auto batch = make_test_batch({9}, 128, 27);
  const at::Tensor loss = test::summed_loss(model, batch);
  loss.backward({}, /*retain_graph=*/true);
  const at::Tensor once = model->norm->weight.grad().clone();
  loss.backward();
  EXPECT_LT(max_abs_diff(model->norm->weight.grad(), 2 * once), 1e-6 * once.abs().max().item<double>());
}

}  // namespace
}  // namespace sb
