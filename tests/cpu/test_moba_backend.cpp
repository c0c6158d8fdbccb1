// MobaAttention behind the attention-backend interface: construction by name and
// options, budget requests (per sequence, DST floor), per-layer statistics (a rerun of
// a layer replaces its entry), and decoding with a cache against the float64 oracle
// built with the same rule (block gate: the gate's query side = mean of the queries
// present; token gate: each query's own), the gate chosen by the attention's "gate" key.

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/attention/core/attention_backend.h"
#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/patterns/moba/moba_attention_backend.h"
#include "kernels/attention/patterns/moba/moba_reference.h"
#include "tests/cpu/test_moba_support.h"
#include "harness/patterns/attention_patterns.h"
#include "kernels/attention/patterns/moba/moba_pattern.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"

namespace sb {
namespace {

using test::moba_max_abs_diff;
using test::moba_random_inputs;

TEST(MobaBackend, MadeByNameAndOptions) {
  const auto names = attention_pattern_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "moba"), names.end());
  const auto by_name = attention_options_named("moba").make_backend();
  EXPECT_EQ(by_name->name(), "moba");
  const auto* defaults = dynamic_cast<const MobaAttention*>(by_name.get());
  ASSERT_NE(defaults, nullptr);
  EXPECT_EQ(defaults->block_size(), 256);
  EXPECT_EQ(defaults->default_top_k(), 32);
  const auto with_options = moba_attention_options(64, 8).make_backend();
  const auto* configured = dynamic_cast<const MobaAttention*>(with_options.get());
  ASSERT_NE(configured, nullptr);
  EXPECT_EQ(configured->block_size(), 64);
  EXPECT_EQ(configured->default_top_k(), 8);
  EXPECT_EQ(configured->gate(), MobaGate::kBlock);
  const AttentionOptions token =
      parse_attention(nlohmann::json{{"name", "moba"}, {"block_size", 64}, {"gate", "token"}}, "$.attention", "test");
  const auto token_backend = token.make_backend();
  EXPECT_EQ(dynamic_cast<const MobaAttention*>(token_backend.get())->gate(), MobaGate::kToken);
  // The resolved attention names the gate, either one (stored results that did not are
  // the block gate's: stored_manifest.h).
  EXPECT_EQ(attention_plugin(token).to_json(token.pattern()).value("gate", ""), "token");
  EXPECT_EQ(attention_plugin(token).to_json(moba_attention_options(64, 8).pattern()).value("gate", ""), "block");
  EXPECT_FALSE(token == moba_attention_options(64, 32));
  EXPECT_EQ(dense_attention_options().make_backend()->name(), "dense");
  EXPECT_THROW(moba_attention_options(0, 8).make_backend(), std::invalid_argument);
  EXPECT_THROW(moba_attention_options(64, 0).make_backend(), std::invalid_argument);
  try {
    attention_options_named("mobba");
    ADD_FAILURE() << "no error for an unknown name";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("dense, moba"), std::string::npos) << e.what();
  }
}

TEST(MobaBackend, ForwardIsTheKernelWithTheRequestedBudgetsAndRecordsStatsPerLayer) {
  const std::vector<int64_t> lengths = {40, 23, 64};
  const auto packed = PackedSequences::from_lengths(lengths);
  const auto in = moba_random_inputs(lengths, lengths, 4, 2, 8, at::kFloat, 31);
  auto backend = moba_attention_options(8, 3).make_backend();

  // No request: the default budget for every sequence.
  const at::Tensor out0 = backend->forward(in.q, in.k, in.v, packed, 0.35, /*layer=*/0);
  MobaParams params = test::moba_test_params(8, {3}, 0.35);
  EXPECT_TRUE(at::equal(out0, moba_attention(in.q, in.k, in.v, packed, params).out));

  // A request with one budget per sequence and a DST floor.
  AttentionBudgetRequest request;
  request.top_k = {1, 2, 5};
  request.coverage_floor_ratio = 0.9;
  request.coverage_reference_k = 6;
  request.coverage_curve_up_to = 9;
  backend->set_budget_request(request);
  params.top_k = request.top_k;
  params.coverage_floor_ratio = 0.9;
  params.coverage_reference_k = 6;
  params.coverage_curve_up_to = 9;
  const MobaResult expected = moba_attention(in.q, in.k, in.v, packed, params);
  const at::Tensor out2 = backend->forward(in.q, in.k, in.v, packed, 0.35, /*layer=*/2);
  const at::Tensor out1 = backend->forward(in.q, in.k, in.v, packed, 0.35, /*layer=*/1);
  EXPECT_TRUE(at::equal(out2, expected.out));
  EXPECT_TRUE(at::equal(out1, expected.out));
  ASSERT_GT(expected.routing.k_floor, 2) << "the floor must move a budget for this test";

  // Layer 1 again (activation checkpointing) with other inputs: replaces its entry.
  const auto other = moba_random_inputs(lengths, lengths, 4, 2, 8, at::kFloat, 32);
  backend->forward(other.q, other.k, other.v, packed, 0.35, /*layer=*/1);
  const MobaResult rerun = moba_attention(other.q, other.k, other.v, packed, params);

  const std::vector<AttentionLayerStats> stats = backend->take_layer_stats();
  ASSERT_EQ(stats.size(), 3u);
  EXPECT_EQ(stats[0].layer, 0);
  EXPECT_EQ(stats[0].top_k, (std::vector<int64_t>{3, 3, 3}));
  EXPECT_EQ(stats[1].layer, 1);
  EXPECT_EQ(stats[1].top_k, rerun.routing.top_k);
  EXPECT_EQ(stats[1].coverage, rerun.routing.coverage);
  EXPECT_DOUBLE_EQ(stats[1].coverage_mean, rerun.routing.coverage_mean);
  EXPECT_EQ(stats[2].layer, 2);
  EXPECT_EQ(stats[2].top_k, expected.routing.top_k);
  EXPECT_EQ(stats[2].coverage, expected.routing.coverage);
  EXPECT_EQ(stats[2].coverage_curve, expected.routing.coverage_curve);
  EXPECT_EQ(stats[2].coverage_curve.size(), 8u);  // K = 64 / 8 blocks < 9: the curve stops at K
  EXPECT_TRUE(stats[0].coverage_curve.empty()) << "layer 0 ran before the curve was asked for";
  for (size_t s = 0; s < lengths.size(); ++s) {
    EXPECT_EQ(stats[2].top_k[s], std::max(request.top_k[s], expected.routing.k_floor));
  }
  EXPECT_TRUE(backend->take_layer_stats().empty()) << "taking the statistics clears them";
}

TEST(MobaBackend, RejectsARequestThatDoesNotMatchTheMicroBatch) {
  const auto packed = PackedSequences::from_lengths({10, 10});
  const auto in = moba_random_inputs({10, 10}, {10, 10}, 2, 1, 8, at::kFloat, 1);
  auto backend = moba_attention_options(4, 2).make_backend();
  AttentionBudgetRequest request;
  request.top_k = {2, 2, 2};
  backend->set_budget_request(request);
  try {
    backend->forward(in.q, in.k, in.v, packed, 0.3, 4);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("layer 4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3 budgets"), std::string::npos) << e.what();
  }
}

TEST(MobaBackend, PrefillThroughTheCacheIsTheTrainingForward) {
  const auto in = moba_random_inputs({45}, {45}, 4, 2, 8, at::kFloat, 41);
  for (const MobaGate gate : {MobaGate::kBlock, MobaGate::kToken}) {
    SCOPED_TRACE(test::moba_gate_name(gate));
    MobaAttention backend(8, 3, MobaCudaKernel::kAuto, gate);
    const at::Tensor cached = backend.forward_cached(in.q, in.k, in.v, 0.3);
    const at::Tensor trained = backend.forward(in.q, in.k, in.v, PackedSequences::from_lengths({45}), 0.3, 0);
    EXPECT_TRUE(at::equal(cached, trained));
  }
}

TEST(MobaBackend, DecodingMatchesTheReferenceBuiltWithTheSameRule) {
  // n new queries at the end of a cache of L keys, for several n (a single step, a
  // chunk crossing a block boundary, a chunk starting mid-block), under either gate.
  for (const MobaGate gate : {MobaGate::kBlock, MobaGate::kToken}) {
    for (const auto& [n, length] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 45}, {1, 48}, {1, 49}, {5, 45}, {11, 40}, {3, 3}}) {
      const auto in = moba_random_inputs({n}, {length}, 4, 2, 8, at::kDouble, 50 + n + length);
      MobaAttention backend(8, 3, MobaCudaKernel::kAuto, gate);
      const at::Tensor out = backend.forward_cached(in.q, in.k, in.v, 0.3);
      const MobaParams params = test::moba_test_params(8, {3}, 0.3, gate);
      const MobaReferenceResult reference =
          moba_reference(in.q, in.k, in.v, PackedSequences::from_lengths({n}),
                         PackedSequences::from_lengths({length}), params);
      EXPECT_LT(moba_max_abs_diff(out, reference.out), 1e-11)
          << test::moba_gate_name(gate) << " gate, n " << n << " L " << length;
    }
  }
}

TEST(MobaBackend, ADecodeStepGatesWithTheTokensOwnQuery) {
  // Exact oracle written here: with k = 2 the token attends to the earlier block j*
  // maximising q . mean(K_j) (its own query, per head) plus its own block up to itself.
  const int64_t length = 37, block = 8;
  const auto in = moba_random_inputs({1}, {length}, 2, 1, 8, at::kDouble, 77);
  auto backend = moba_attention_options(block, 2).make_backend();
  const at::Tensor out = backend->forward_cached(in.q, in.k, in.v, 0.3);  // [1, 2, 8]
  for (int64_t h = 0; h < 2; ++h) {
    const at::Tensor query = in.q[0][h];  // [8]
    int64_t best = 0;
    double best_score = -1e300;
    for (int64_t j = 0; j < 4; ++j) {  // blocks 0..3 are before the token's block 4
      const double score =
          at::dot(query, in.k.narrow(0, j * block, block).select(1, 0).mean(0)).item<double>();
      if (score > best_score) best_score = score, best = j;
    }
    const at::Tensor keys = at::cat({in.k.narrow(0, best * block, block), in.k.narrow(0, 32, 5)})
                                .select(1, 0);  // [13, 8]
    const at::Tensor values =
        at::cat({in.v.narrow(0, best * block, block), in.v.narrow(0, 32, 5)}).select(1, 0);
    const at::Tensor expected = at::softmax(at::mv(keys, query) * 0.3, 0).matmul(values);
    EXPECT_LT(moba_max_abs_diff(out[0][h], expected), 1e-12) << "head " << h;
  }
}

}  // namespace
}  // namespace sb
