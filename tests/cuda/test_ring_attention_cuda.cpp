// Ring attention on a GPU (docs/context_parallel.md, "On GPUs"). Every rank's steps
// composed in one thread (each rank's queries against every shard through the CUDA step,
// merged in float32 with the log-sum-exp rule; each shard's dK/dV summed in float32 over
// the ranks) against the one-rank float64 oracle, for every layout (stripes inside and
// across blocks), CP 2 and 4, dense, MoBA and vertical-slash (slash blocks and column
// steps), GQA 2:1 and 7:1, head_dim 64 and 128,
// lengths not multiples of cp x block; and the ring itself through autograd on one rank.
// Ranks as threads of one process cannot run the backward ring: autograd runs every
// CUDA node of the process on one device thread, so the first rank's backward would
// wait forever for the second's. The ring between processes on the GPU:
// test_ring_attention_processes_cuda.cpp, and scripts/gpu-check.sh (multirank stage: CP 2
// training against one process).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <chrono>
#include <string>
#include <vector>

#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/ring/cp_sharding.h"
#include "kernels/attention/ring/cuda/ring_step_cuda.h"
#include "kernels/attention/ring/ring_attention.h"
#include "kernels/attention/ring/ring_column_step_cpu.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"
#include "tests/cuda/gpu_ring_cases.h"
#include "tests/support/ring_attention_cases.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_pattern.h"

namespace sb {
namespace {

using test::GpuRingCase;
using test::Gradients;
using test::kBlock;
using test::Pattern;
using test::VerticalSlashIndex;
using test::expect_near_oracle;
using test::gpu_moba_params;
using test::gpu_ring_inputs;
using test::gpu_ring_oracle;
using test::gpu_vertical_slash_rule;

std::vector<GpuRingCase> gpu_ring_cases() {
  const std::vector<std::pair<std::string, CpLayout>> layouts{{"contiguous", {CpLayoutKind::kContiguous, 0}},
                                                             {"zigzag", {CpLayoutKind::kZigzag, 0}},
                                                             {"striped64", {CpLayoutKind::kStriped, 64}},
                                                             {"striped24", {CpLayoutKind::kStriped, 24}}};
  const std::vector<std::pair<std::string, Pattern>> patterns{
      {"_dense", Pattern::kDense}, {"_moba", Pattern::kMoba}, {"_vs", Pattern::kVerticalSlash}};
  std::vector<GpuRingCase> cases;
  for (int64_t cp : {2, 4}) {
    for (const auto& [name, layout] : layouts) {
      for (const auto& [pattern_name, pattern] : patterns) {
        cases.push_back({name + pattern_name + "_cp" + std::to_string(cp), layout, cp, 0, pattern});
      }
    }
  }
  cases.push_back({"zigzag_moba_cp4_inner2", {CpLayoutKind::kZigzag, 0}, 4, 2, Pattern::kMoba});
  cases.push_back({"striped64_dense_cp4_inner2", {CpLayoutKind::kStriped, 64}, 4, 2, Pattern::kDense});
  cases.push_back({"striped64_moba_cp2_gqa7_fp16", {CpLayoutKind::kStriped, 64}, 2, 0, Pattern::kMoba, 14, 2, 64,
                   at::kHalf});
  cases.push_back({"zigzag_vs_cp2_gqa7_dim128", {CpLayoutKind::kZigzag, 0}, 2, 0, Pattern::kVerticalSlash, 14, 2, 128});
  cases.push_back({"zigzag_dense_cp2_dim128", {CpLayoutKind::kZigzag, 0}, 2, 0, Pattern::kDense, 4, 2, 128});
  return cases;
}

TEST(RingAttentionCuda, ComposedStepsOfEveryLayoutEqualTheOneRankFloat64Oracle) {
  const std::vector<int64_t> lengths{700, 333, 64, 5};
  const PackedSequences sequences = PackedSequences::from_lengths(lengths);
  const BlockLayout layout = BlockLayout::build(sequences, sequences, kBlock, true);
  for (const GpuRingCase& c : gpu_ring_cases()) {
    SCOPED_TRACE(c.name);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.dim));
    const test::RingInputs in = gpu_ring_inputs(c, lengths);
    const VerticalSlashIndex rule =
        c.pattern == Pattern::kVerticalSlash ? gpu_vertical_slash_rule(in, scale) : VerticalSlashIndex{};
    const test::RingOracle oracle = gpu_ring_oracle(in, c, scale, rule);
    // Vertical-slash: its slash blocks as the pattern, its columns as the second partial.
    const RingCallPattern vs =
        c.pattern == Pattern::kVerticalSlash ? vertical_slash_ring_pattern(rule, layout) : RingCallPattern{};
    if (c.pattern == Pattern::kVerticalSlash) EXPECT_GT(vs.columns->total(), 0);  // both parts take part
    const RingBlockPattern pattern = [&] {
      if (c.pattern == Pattern::kDense) return RingBlockPattern::causal(layout);
      if (c.pattern == Pattern::kVerticalSlash) return vs.blocks;
      const MobaRouting routing = moba_route_cpu(in.q.to(at::kDouble), in.k.to(at::kDouble), layout, gpu_moba_params(scale));
      return RingBlockPattern{routing.selected, routing.selected_count};
    }();
    const CpSharding sharding = CpSharding::build(sequences, c.cp, c.layout);
    const int64_t cp = c.cp;
    std::vector<RingShardTiles> shards;
    std::vector<at::Tensor> q(cp), k(cp), v(cp), g(cp), out(cp), lse(cp), dq(cp), dk(cp), dv(cp);
    for (int64_t r = 0; r < cp; ++r) {
      shards.push_back(RingShardTiles::build(sharding.tokens_of(r), layout));
      q[r] = sharding.shard(in.q, r).contiguous().cuda();
      k[r] = sharding.shard(in.k, r).contiguous().cuda();
      v[r] = sharding.shard(in.v, r).contiguous().cuda();
      g[r] = sharding.shard(in.grad_out, r).contiguous().cuda();
      const auto f32 = q[r].options().dtype(at::kFloat);
      out[r] = at::zeros(q[r].sizes(), f32);
      lse[r] = at::full({q[r].size(0), q[r].size(1)}, -INFINITY, f32);
      dq[r] = at::zeros(q[r].sizes(), f32);
      dk[r] = at::zeros(k[r].sizes(), f32);
      dv[r] = at::zeros(v[r].sizes(), f32);
    }
    int64_t kept = 0;
    for (int64_t r = 0; r < cp; ++r) {
      for (int64_t s = 0; s < cp; ++s) {
        at::Tensor out_step = at::empty_like(q[r]), lse_step = at::empty_like(lse[r]);
        kept += ring_step_forward_cuda(q[r], k[s], v[s], {shards[r], shards[s], pattern, scale}, out_step, lse_step);
        ring_merge_partial(out[r], lse[r], out_step, lse_step);
        if (c.pattern == Pattern::kVerticalSlash) {
          kept += ring_column_step_forward_cuda(q[r], k[s], v[s], shards[r], shards[s], *vs.columns, scale, out_step,
                                                lse_step);
          ring_merge_partial(out[r], lse[r], out_step, lse_step);
        }
      }
      out[r] = out[r].to(c.dtype);
    }
    for (int64_t r = 0; r < cp; ++r) {
      for (int64_t s = 0; s < cp; ++s) {
        ring_step_backward_cuda(g[r], q[r], k[s], v[s], out[r], lse[r], {shards[r], shards[s], pattern, scale}, dq[r],
                                dk[s], dv[s]);
        if (c.pattern == Pattern::kVerticalSlash) {
          ring_column_step_backward_cuda(g[r], q[r], k[s], v[s], out[r], lse[r], shards[r], shards[s], *vs.columns, scale,
                                         dq[r], dk[s], dv[s]);
        }
      }
    }
    if (c.pattern == Pattern::kDense) {  // every causal pair once, on its query's rank
      int64_t expected = 0;
      for (int64_t n : lengths) expected += c.q_heads * n * (n + 1) / 2;
      EXPECT_EQ(kept, expected);
    }
    const auto whole = [&](const std::vector<at::Tensor>& parts) {
      std::vector<at::Tensor> host;
      for (const at::Tensor& part : parts) host.push_back(part.cpu());
      return sharding.unshard(host);
    };
    expect_near_oracle({whole(out), whole(lse), whole(dq), whole(dk), whole(dv)}, oracle, c.dtype);
  }
}

// The ring itself on a GPU, one rank: its float32 running output and accumulators, the
// casts back, MoBA's block means summed on the device, vertical-slash's index from the
// GPU's tensors and its column steps, through autograd.
TEST(RingAttentionCuda, OneRankRingThroughAutogradEqualsTheOracle) {
  const std::vector<int64_t> lengths{700, 333, 64, 5};
  const PackedSequences sequences = PackedSequences::from_lengths(lengths);
  for (const Pattern kind : {Pattern::kDense, Pattern::kMoba, Pattern::kVerticalSlash}) {
    const GpuRingCase c{"pattern " + std::to_string(static_cast<int>(kind)), {CpLayoutKind::kStriped, 64}, 1, 0, kind};
    SCOPED_TRACE(c.name);
    const double scale = 0.125;
    const test::RingInputs in = gpu_ring_inputs(c, lengths);
    const std::shared_ptr<RingPatternSelector> selector = test::gpu_ring_selector(c);
    auto context = std::make_shared<RingContext>(nullptr, 0, 1, 0, std::chrono::milliseconds(1000));
    at::Tensor q = in.q.cuda().requires_grad_(true), k = in.k.cuda().requires_grad_(true),
               v = in.v.cuda().requires_grad_(true);
    const RingAttentionResult result = ring_attention(q, k, v, CpSharding::build(sequences, 1, c.layout), *selector,
                                                      test::gpu_ring_request(c), scale, context);
    const bool vertical_slash = c.pattern == Pattern::kVerticalSlash;
    const VerticalSlashIndex index = vertical_slash ? test::ring_last_index(*selector) : VerticalSlashIndex{};
    // Vertical-slash: the index the ring built from the GPU's tensors is the one-rank rule's.
    const test::RingOracle oracle = gpu_ring_oracle(in, c, scale, index);
    if (vertical_slash) {
      const VerticalSlashIndex rule = gpu_vertical_slash_rule(in, scale);
      ASSERT_EQ(index.size(), rule.size());
      for (size_t s = 0; s < rule.size(); ++s) {
        ASSERT_EQ(index[s].size(), rule[s].size()) << "sequence " << s;
        for (size_t h = 0; h < rule[s].size(); ++h) {
          EXPECT_EQ(index[s][h].verticals, rule[s][h].verticals) << "sequence " << s << " head " << h;
          EXPECT_EQ(index[s][h].slashes, rule[s][h].slashes) << "sequence " << s << " head " << h;
        }
      }
    }
    EXPECT_EQ(result.out.scalar_type(), at::kBFloat16);
    EXPECT_EQ(result.lse.scalar_type(), at::kFloat);
    result.out.backward(in.grad_out.cuda());
    EXPECT_EQ(q.grad().scalar_type(), at::kBFloat16);
    expect_near_oracle({result.out.detach().cpu(), result.lse.cpu(), q.grad().cpu(), k.grad().cpu(), v.grad().cpu()},
                       oracle, c.dtype);
    // Forward and backward step (and MoBA's block means), each with the device's time.
    const std::vector<RingStepEvent> events = context->take_events();
    ASSERT_EQ(events.size(), kind == Pattern::kDense ? 2u : 3u);
    for (const RingStepEvent& event : events) EXPECT_GT(event.compute_s, 0.0);
  }
}

}  // namespace
}  // namespace sb
