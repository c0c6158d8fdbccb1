// Qwen2 model on the small presets: parameter counts, shapes, packing invariance,
// tied and untied heads, a few optimizer steps, rotary embedding properties.

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>
#include <torch/optim/adam.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/attention/core/attention_backend.h"
#include "kernels/bench/rms_norm/rms_norm.h"
#include "models/qwen2/qwen2_model.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"

namespace sb {
namespace {

Qwen2ForCausalLM make_model(const std::string& preset, uint64_t seed = 0) {
  at::manual_seed(seed);
  return Qwen2ForCausalLM(qwen2_preset(preset),
                          std::shared_ptr<AttentionBackend>(dense_attention_options().make_backend()));
}

int64_t numel_of_parameters(Qwen2ForCausalLM& model) {
  int64_t total = 0;
  for (const at::Tensor& p : model->parameters()) total += p.numel();
  return total;
}

// Positions restarting at 0 in every sequence: [T] int64.
at::Tensor positions_for(const std::vector<int64_t>& lengths) {
  std::vector<at::Tensor> parts;
  for (int64_t n : lengths) parts.push_back(at::arange(n, at::kLong));
  return at::cat(parts);
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

TEST(Qwen2Config, RealPresetParameterCounts) {
  // The published totals of the checkpoints (tied embeddings counted once).
  EXPECT_EQ(qwen2_parameter_count(qwen2_preset("qwen2.5-0.5b")), 494032768);
  EXPECT_EQ(qwen2_parameter_count(qwen2_preset("qwen2.5-1.5b")), 1543714304);
  EXPECT_EQ(qwen2_parameter_count(qwen2_preset("qwen2.5-3b")), 3085938688);
  EXPECT_EQ(qwen2_parameter_count(qwen2_preset("qwen2.5-7b")), 7615616512);
}

TEST(Qwen2Config, SmallPresetCountsMatchBuiltModels) {
  for (const char* name : {"qwen2-tiny", "qwen2-test"}) {
    Qwen2ForCausalLM model = make_model(name);
    EXPECT_EQ(numel_of_parameters(model), qwen2_parameter_count(qwen2_preset(name))) << name;
  }
}

TEST(Qwen2Config, PresetsValidateAndNamesAreExact) {
  for (const std::string& name : qwen2_preset_names()) {
    EXPECT_EQ(qwen2_preset(name).name, name);
    EXPECT_NO_THROW(qwen2_preset(name).validate()) << name;
  }
  EXPECT_THROW(qwen2_preset("Qwen2.5-0.5B"), std::invalid_argument);
}

TEST(Qwen2Config, UnknownPresetListsKnownNames) {
  try {
    qwen2_preset("qwen2-huge");
    FAIL() << "qwen2_preset(\"qwen2-huge\") did not throw";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("qwen2-huge"), std::string::npos) << message;
    for (const char* name :
         {"qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "qwen2-tiny", "qwen2-test"}) {
      EXPECT_NE(message.find(name), std::string::npos) << "missing " << name << ": " << message;
    }
  }
}

TEST(Qwen2Config, ValidateRejectsInconsistentFields) {
  Qwen2Config config = qwen2_preset("qwen2-test");
  config.num_key_value_heads = 3;  // 4 query heads do not group over 3
  EXPECT_THROW(config.validate(), std::invalid_argument);
  config = qwen2_preset("qwen2-test");
  config.head_dim = 7;  // rotate-half needs an even head_dim
  EXPECT_THROW(config.validate(), std::invalid_argument);
  config = qwen2_preset("qwen2-test");
  config.vocab_size = 0;
  EXPECT_THROW(config.validate(), std::invalid_argument);
}

TEST(Qwen2Model, ForwardShapesAndDtype) {
  Qwen2ForCausalLM model = make_model("qwen2-test");
  const std::vector<int64_t> lengths = {3, 9};
  const at::Tensor tokens = at::randint(128, {12}, at::kLong);
  const at::Tensor logits =
      model->forward(tokens, positions_for(lengths), PackedSequences::from_lengths(lengths));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{12, 128}));
  EXPECT_EQ(logits.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::isfinite(logits).all().item<bool>());
  EXPECT_THROW(model->forward(tokens, positions_for({12}), PackedSequences::from_lengths({5, 5})),
               std::invalid_argument);
  EXPECT_THROW(
      model->forward(tokens.to(at::kInt), positions_for({12}), PackedSequences::from_lengths({12})),
      c10::Error);
}

TEST(Qwen2Model, ParameterNamesFollowHuggingFace) {
  Qwen2ForCausalLM model = make_model("qwen2-test");
  const auto params = model->named_parameters();
  for (const char* name :
       {"embed_tokens.weight", "layers.0.input_layernorm.weight", "layers.1.self_attn.q_proj.bias",
        "layers.1.self_attn.o_proj.weight", "layers.0.post_attention_layernorm.weight",
        "layers.0.mlp.gate_proj.weight", "layers.0.mlp.down_proj.weight", "norm.weight",
        "lm_head.weight"}) {
    EXPECT_NE(params.find(name), nullptr) << name;
  }
  EXPECT_EQ(params.find("layers.0.self_attn.o_proj.bias"), nullptr);
  EXPECT_EQ(params.find("layers.0.mlp.up_proj.bias"), nullptr);
}

TEST(Qwen2Model, InitialisationFollowsHuggingFace) {
  Qwen2ForCausalLM model = make_model("qwen2-tiny");
  const auto params = model->named_parameters();
  EXPECT_TRUE(at::equal(*params.find("norm.weight"), at::ones({128})));
  EXPECT_TRUE(at::equal(*params.find("layers.2.self_attn.k_proj.bias"), at::zeros({64})));
  // normal(0, 0.02): over 256 x 128 draws the sample std is within 2% of 0.02.
  const double std = params.find("embed_tokens.weight")->std().item<double>();
  EXPECT_NEAR(std, 0.02, 0.0004);
}

TEST(Qwen2Model, PackedBatchEqualsSequencesRunAlone) {
  Qwen2ForCausalLM model = make_model("qwen2-test", 5);
  model->to(at::kDouble);
  const std::vector<int64_t> lengths = {5, 11, 3};
  at::manual_seed(9);
  const at::Tensor tokens = at::randint(128, {19}, at::kLong);
  c10::NoGradGuard no_grad;
  const at::Tensor packed =
      model->forward(tokens, positions_for(lengths), PackedSequences::from_lengths(lengths));

  int64_t begin = 0;
  for (int64_t n : lengths) {
    const at::Tensor alone =
        model->forward(tokens.slice(0, begin, begin + n), at::arange(n, at::kLong),
                       PackedSequences::from_lengths({n}));
    // Float64 inside; the float32 logits then differ by at most one rounding.
    EXPECT_LT(max_abs_diff(packed.slice(0, begin, begin + n), alone), 1e-6)
        << "sequence at " << begin;
    begin += n;
  }

  // The check can fail: treating the pack as one sequence changes the later ones.
  const at::Tensor merged =
      model->forward(tokens, positions_for(lengths), PackedSequences::from_lengths({19}));
  EXPECT_GT(max_abs_diff(merged.slice(0, 5, 19), packed.slice(0, 5, 19)), 1e-4);
}

TEST(Qwen2Model, TiedHeadUsesEmbeddingUntiedHasItsOwn) {
  Qwen2ForCausalLM tied = make_model("qwen2-tiny", 1);
  Qwen2ForCausalLM untied = make_model("qwen2-test", 1);
  EXPECT_FALSE(tied->lm_head);
  EXPECT_TRUE(untied->lm_head);
  EXPECT_EQ(tied->named_parameters().find("lm_head.weight"), nullptr);

  for (Qwen2ForCausalLM* model : {&tied, &untied}) {
    const std::vector<int64_t> lengths = {4, 6};
    const at::Tensor tokens = at::randint((*model)->config().vocab_size, {10}, at::kLong);
    const at::Tensor positions = positions_for(lengths);
    const PackedSequences packed = PackedSequences::from_lengths(lengths);
    c10::NoGradGuard no_grad;
    const at::Tensor logits = (*model)->forward(tokens, positions, packed);

    // Recompute the final hidden state by hand and apply the expected head.
    const auto tables =
        qwen2_rotary_tables(positions, (*model)->config().head_dim, (*model)->config().rope_theta);
    at::Tensor h = (*model)->embed_tokens->forward(tokens);
    for (const auto& layer : *(*model)->layers) {
      h = layer->as<Qwen2DecoderLayer>()->forward(h, tables.first, tables.second, packed,
                                                  (*model)->attention_backend());
    }
    h = (*model)->norm->forward(h);
    const at::Tensor head =
        (*model)->lm_head ? (*model)->lm_head->weight : (*model)->embed_tokens->weight;
    EXPECT_LT(max_abs_diff(logits, at::matmul(h, head.t())), 1e-5);
  }
}

TEST(Qwen2Model, AdamStepsReduceLossOnFixedBatch) {
  Qwen2ForCausalLM model = make_model("qwen2-test", 3);
  const std::vector<int64_t> lengths = {16, 9};
  at::manual_seed(17);
  const at::Tensor tokens = at::randint(128, {25}, at::kLong);
  const at::Tensor targets = at::randint(128, {25}, at::kLong);
  const at::Tensor positions = positions_for(lengths);
  const PackedSequences packed = PackedSequences::from_lengths(lengths);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));

  std::vector<double> losses;
  for (int step = 0; step < 20; ++step) {
    optimizer.zero_grad();
    const at::Tensor loss =
        at::cross_entropy_loss(model->forward(tokens, positions, packed), targets);
    loss.backward();
    optimizer.step();
    losses.push_back(loss.item<double>());
  }
  // Uniform guessing over 128 tokens costs ln(128) = 4.85 nats at initialisation;
  // memorising 25 fixed targets reaches about 0.3 after 20 steps (several seeds tried).
  EXPECT_NEAR(losses.front(), std::log(128.0), 0.1);
  EXPECT_LT(losses.back(), 1.0) << "first " << losses.front() << " last " << losses.back();
  EXPECT_LT(losses[10], losses[0]);
}

TEST(Qwen2Model, RmsNormMatchesFloat64Reference) {
  at::manual_seed(21);
  Qwen2RMSNorm norm(48, 1e-6);
  {
    c10::NoGradGuard no_grad;
    norm->weight.copy_(at::randn({48}));
  }
  const at::Tensor x = at::randn({7, 48}) * 4.0;
  c10::NoGradGuard no_grad;
  EXPECT_LT(max_abs_diff(norm->forward(x), rms_norm_reference(x, norm->weight, 1e-6)), 1e-5);
}

TEST(Qwen2Rotary, TablesMatchClosedForm) {
  const int64_t head_dim = 16;
  const double theta = 10000.0;
  const at::Tensor positions = at::tensor(std::vector<int64_t>{0, 1, 7, 100}, at::kLong);
  const auto [cos, sin] = qwen2_rotary_tables(positions, head_dim, theta);
  ASSERT_EQ(cos.sizes(), (std::vector<int64_t>{4, head_dim}));
  ASSERT_EQ(cos.scalar_type(), at::kFloat);
  for (int64_t t = 0; t < 4; ++t) {
    const double p = static_cast<double>(positions[t].item<int64_t>());
    for (int64_t d = 0; d < head_dim; ++d) {
      const int64_t i = d % (head_dim / 2);  // rotate-half: both halves share a frequency
      const double angle = p * std::pow(theta, -2.0 * static_cast<double>(i) / head_dim);
      EXPECT_NEAR(cos[t][d].item<double>(), std::cos(angle), 2e-5) << "t " << t << " d " << d;
      EXPECT_NEAR(sin[t][d].item<double>(), std::sin(angle), 2e-5) << "t " << t << " d " << d;
    }
  }
}

TEST(Qwen2Rotary, RotatesHalvesLikeHuggingFace) {
  // Rotate-half pairs dimension i with i + D/2 (not with the neighbour i + 1):
  // y_i = x_i cos - x_{i+D/2} sin, y_{i+D/2} = x_{i+D/2} cos + x_i sin.
  const int64_t head_dim = 8, half = 4;
  at::manual_seed(2);
  const at::Tensor x = at::randn({3, 2, head_dim}, at::kDouble);
  const at::Tensor positions = at::tensor(std::vector<int64_t>{0, 5, 42}, at::kLong);
  const auto [cos, sin] = qwen2_rotary_tables(positions, head_dim, 100.0);
  const at::Tensor y = qwen2_apply_rotary(x, cos, sin);
  auto xa = x.accessor<double, 3>();
  auto ya = y.accessor<double, 3>();
  const at::Tensor cos64 = cos.to(at::kDouble), sin64 = sin.to(at::kDouble);
  auto ca = cos64.accessor<double, 2>();
  auto sa = sin64.accessor<double, 2>();
  for (int64_t t = 0; t < 3; ++t) {
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t i = 0; i < half; ++i) {
        EXPECT_NEAR(ya[t][h][i], xa[t][h][i] * ca[t][i] - xa[t][h][i + half] * sa[t][i], 1e-12);
        EXPECT_NEAR(ya[t][h][i + half],
                    xa[t][h][i + half] * ca[t][i + half] + xa[t][h][i] * sa[t][i + half], 1e-12);
      }
    }
  }
}

TEST(Qwen2Rotary, PositionZeroIsIdentity) {
  const at::Tensor x = at::randn({1, 3, 32});
  const auto [cos, sin] = qwen2_rotary_tables(at::zeros({1}, at::kLong), 32, 1e6);
  EXPECT_TRUE(at::equal(qwen2_apply_rotary(x, cos, sin), x));
}

TEST(Qwen2Rotary, DotProductDependsOnlyOnRelativePosition) {
  const int64_t head_dim = 32;
  at::manual_seed(4);
  const at::Tensor q = at::randn({1, 1, head_dim}, at::kDouble);
  const at::Tensor k = at::randn({1, 1, head_dim}, at::kDouble);
  auto rotated_dot = [&](int64_t m, int64_t n) {
    const auto qt = qwen2_rotary_tables(at::full({1}, m, at::kLong), head_dim, 10000.0);
    const auto kt = qwen2_rotary_tables(at::full({1}, n, at::kLong), head_dim, 10000.0);
    return (qwen2_apply_rotary(q, qt.first, qt.second) * qwen2_apply_rotary(k, kt.first, kt.second))
        .sum()
        .item<double>();
  };
  for (int64_t offset : {0, 3, 17}) {
    const double base = rotated_dot(offset, 0);
    for (int64_t n : {1, 10, 150}) {
      // float32 tables: angle errors of about position * 2^-24.
      EXPECT_NEAR(rotated_dot(n + offset, n), base, 1e-4) << "m - n = " << offset << ", n = " << n;
    }
  }
  // And it does depend on the offset.
  EXPECT_GT(std::abs(rotated_dot(3, 0) - rotated_dot(4, 0)), 1e-3);
}

}  // namespace
}  // namespace sb
