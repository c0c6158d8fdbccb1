// The analytic (FLOP-count) latency profile: pair counts worked out by hand, the
// Qwen2.5-0.5B per-token linear FLOPs from its parameter count, MoBA at full budget
// equal to dense causal, and timings that follow the stated peak and efficiency.
#include <gtest/gtest.h>

#include "harness/latency/analytic_profile.h"
#include "harness/latency/latency_predictor.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"
#include "kernels/attention/patterns/moba/moba_pattern.h"

namespace sb {
namespace {

TEST(AnalyticProfile, AttentionPairsByHand) {
  const DensePattern dense;
  const MobaPattern moba(MobaOptions{4, 2});
  EXPECT_DOUBLE_EQ(dense.attended_pairs(4, 0), 10);  // 1 + 2 + 3 + 4
  // L = 10, B = 4: blocks of 4, 4, 2 queries. k = 2: diagonal causal (10 + 10 + 3) plus
  // one earlier block of 4 keys for blocks 1 and 2 (4 * 4 + 2 * 4).
  EXPECT_DOUBLE_EQ(moba.attended_pairs(10, 2), 10 + 10 + 3 + 16 + 8);
  // k >= blocks: every earlier block, which is exactly dense causal.
  EXPECT_DOUBLE_EQ(moba.attended_pairs(10, 3), dense.attended_pairs(10, 0));
  EXPECT_DOUBLE_EQ(moba.attended_pairs(10, 50), dense.attended_pairs(10, 0));
  EXPECT_THROW(moba.attended_pairs(10, 0), std::invalid_argument);
}

TEST(AnalyticProfile, LinearFlopsAreTwicePerLayerMatmulParameters) {
  // Qwen2.5-0.5B: q 896x896, k and v 896x128, o 896x896, MLP 3 x 896x4864 = 14,909,440
  // weights per layer; 2 FLOPs per weight per token.
  EXPECT_DOUBLE_EQ(layer_linear_forward_flops_per_token(qwen2_preset("qwen2.5-0.5b")), 2.0 * 14909440);
}

TEST(AnalyticProfile, TimesFollowPeakAndEfficiency) {
  const Qwen2Config& config = qwen2_preset("qwen2.5-3b");
  DeviceThroughput device{"test", 100.0, 0.5, 0.25};
  const MobaPattern moba(MobaOptions{256, 32});
  const LatencyProfile p = make_analytic_profile(config, moba, {4096, 8192}, {8, 32}, device);
  EXPECT_EQ(p.kind, "analytic");
  const double rest = 3 * layer_linear_forward_flops_per_token(config) * 4096 / (100e12 * 0.5) * 1e3;
  EXPECT_NEAR(p.rest_ms[0].median, rest, 1e-9);
  const double attn = 3.5 * layer_attention_forward_flops(config, moba, 4096, 8) / (100e12 * 0.25) * 1e3;
  EXPECT_NEAR(p.layer_ms[0][0].median, rest + attn, 1e-9);
  EXPECT_LT(p.layer_ms[1][0].median, p.layer_ms[1][1].median);  // a larger budget costs more
  // At 8192 tokens and k = 32 (all 32 blocks) MoBA costs what dense causal costs, plus the gates.
  const LatencyProfile dense = make_analytic_profile(config, DensePattern(), {4096, 8192}, {}, device);
  EXPECT_EQ(dense.budgets, (std::vector<int64_t>{0}));
  EXPECT_GT(p.layer_ms[1][1].median, dense.layer_ms[1][0].median);
  EXPECT_LT(p.layer_ms[1][1].median, dense.layer_ms[1][0].median * 1.01);
  EXPECT_NO_THROW(LatencyPredictor{p});
  EXPECT_EQ(device_throughput_preset("h200").peak_tflops, 989.0);
  EXPECT_THROW(device_throughput_preset("h100-typo"), std::invalid_argument);
}

}  // namespace
}  // namespace sb
