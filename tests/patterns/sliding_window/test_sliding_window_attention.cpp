// The sliding-window kernel (sliding_window_attention.h) and decoding against the float64
// reference (sliding_window_reference.h), forward and backward, and the reference itself
// against rules it must meet: a window covering the sequence is dense causal attention, a
// window of one token without sinks returns each query's own value, and the kept pairs
// counted by brute force are sliding_window_pairs.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "kernels/attention/core/dense_attention.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_attention.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_backend.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_reference.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_rule.h"

namespace sb {
namespace {

double max_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

struct Inputs {
  at::Tensor q, k, v, grad;
};

Inputs inputs(int64_t tokens, int64_t q_heads, int64_t kv_heads, int64_t dim, uint64_t seed,
              at::ScalarType dtype = at::kDouble) {
  at::manual_seed(seed);
  return {at::randn({tokens, q_heads, dim}, at::kDouble).to(dtype), at::randn({tokens, kv_heads, dim}, at::kDouble).to(dtype),
          at::randn({tokens, kv_heads, dim}, at::kDouble).to(dtype),
          at::randn({tokens, q_heads, dim}, at::kDouble).to(dtype)};
}

int64_t total(const std::vector<int64_t>& lengths) {
  int64_t t = 0;
  for (int64_t n : lengths) t += n;
  return t;
}

struct Gradients {
  at::Tensor out, dq, dk, dv;
};

template <typename Attend>
Gradients run(const Inputs& in, Attend attend) {
  at::Tensor q = in.q.clone().requires_grad_(true), k = in.k.clone().requires_grad_(true),
             v = in.v.clone().requires_grad_(true);
  at::Tensor out = attend(q, k, v);
  (out.to(at::kDouble) * in.grad.to(at::kDouble)).sum().backward();
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

struct Case {
  std::string name;
  std::vector<int64_t> lengths;
  std::vector<int64_t> windows;
  int64_t sinks;
  int64_t q_heads = 4, kv_heads = 2;
};

// Windows below, at and above a tile (128 rows) and the sequence; sinks inside and beyond the
// window; an empty sequence; grouped-query and one-to-one heads.
std::vector<Case> cases() {
  return {
      {"one long sequence", {300}, {37}, 4},
      {"window of one, no sinks", {150}, {1}, 0},
      {"window of one with sinks", {150}, {1}, 5},
      {"sinks longer than the window", {200}, {8}, 40},
      {"window a tile", {300}, {128}, 4},
      {"window above a tile", {400}, {200}, 2},
      {"packed with an empty sequence", {97, 0, 150, 5, 64}, {20, 3, 70, 2, 64}, 4},
      {"window covering the sequence", {90, 40}, {90, 1000}, 4},
      {"sinks longer than the sequence", {30, 70}, {5, 9}, 50},
      {"one head per key head", {130}, {31}, 3, 2, 2},
  };
}

TEST(SlidingWindowAttention, ForwardAndBackwardEqualTheFloat64Reference) {
  for (const Case& c : cases()) {
    const Inputs in = inputs(total(c.lengths), c.q_heads, c.kv_heads, 16, 11);
    const PackedSequences sequences = PackedSequences::from_lengths(c.lengths);
    const double scale = 0.25;
    const Gradients got = run(in, [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
      return sliding_window_attention(q, k, v, sequences, c.windows, c.sinks, scale);
    });
    const Gradients want = run(in, [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
      return sliding_window_reference(q, k, v, sequences, c.windows, c.sinks, scale).out;
    });
    EXPECT_LT(max_diff(got.out, want.out), 1e-12) << c.name;
    EXPECT_LT(max_diff(got.dq, want.dq), 1e-12) << c.name;
    EXPECT_LT(max_diff(got.dk, want.dk), 1e-12) << c.name;
    EXPECT_LT(max_diff(got.dv, want.dv), 1e-12) << c.name;
    EXPECT_TRUE(got.dq.isfinite().all().item<bool>()) << c.name;
  }
}

TEST(SlidingWindowAttention, Float32And16BitInputsStayNearTheReference) {
  const std::vector<int64_t> lengths{200, 77};
  const PackedSequences sequences = PackedSequences::from_lengths(lengths);
  for (const auto& [dtype, tolerance] : std::vector<std::pair<at::ScalarType, double>>{
           {at::kFloat, 2e-5}, {at::kBFloat16, 4e-2}}) {
    const Inputs in = inputs(total(lengths), 4, 2, 16, 5, dtype);
    const at::Tensor got = sliding_window_attention(in.q, in.k, in.v, sequences, {50, 30}, 4, 0.25);
    EXPECT_EQ(got.scalar_type(), dtype);
    EXPECT_LT(max_diff(got, sliding_window_reference(in.q, in.k, in.v, sequences, {50, 30}, 4, 0.25).out), tolerance);
  }
}

TEST(SlidingWindowReference, AWindowCoveringTheSequenceIsDenseCausalAttention) {
  const std::vector<int64_t> lengths{50, 33};
  const Inputs in = inputs(total(lengths), 4, 2, 8, 3);
  const PackedSequences sequences = PackedSequences::from_lengths(lengths);
  const at::Tensor dense = dense_causal_attention(in.q, in.k, in.v, sequences, 0.3);
  EXPECT_LT(max_diff(sliding_window_reference(in.q, in.k, in.v, sequences, {50, 33}, 0, 0.3).out, dense), 1e-12);
  EXPECT_LT(max_diff(sliding_window_reference(in.q, in.k, in.v, sequences, {1, 1}, 50, 0.3).out, dense), 1e-12)
      << "sinks covering the sequence keep every causal key";
  // A window shorter than the sequence drops keys: the outputs differ.
  EXPECT_GT(max_diff(sliding_window_reference(in.q, in.k, in.v, sequences, {10, 10}, 0, 0.3).out, dense), 1e-3);
}

TEST(SlidingWindowReference, AOneTokenWindowWithoutSinksReturnsEachQuerysValue) {
  const Inputs in = inputs(40, 4, 2, 8, 4);
  const at::Tensor out =
      sliding_window_reference(in.q, in.k, in.v, PackedSequences::from_lengths({40}), {1}, 0, 0.3).out;
  EXPECT_LT(max_diff(out, in.v.repeat_interleave(2, 1)), 1e-14);
}

TEST(SlidingWindowRule, KeptPairsEqualCountingByHand) {
  for (int64_t length : {0, 1, 2, 7, 64, 100}) {
    for (int64_t window : {1, 2, 5, 64, 99, 100, 150}) {
      for (int64_t sinks : {0, 1, 4, 30, 200}) {
        double counted = 0;
        for (int64_t p = 0; p < length; ++p) {
          for (int64_t j = 0; j < length; ++j) counted += sliding_window_keeps(p, j, window, sinks) ? 1 : 0;
        }
        EXPECT_EQ(sliding_window_pairs(length, window, sinks), counted)
            << "L " << length << " W " << window << " S " << sinks;
      }
    }
  }
}

TEST(SlidingWindowAttention, MalformedInputsAreRefused) {
  const Inputs in = inputs(20, 4, 2, 8, 1);
  const PackedSequences one = PackedSequences::from_lengths({20});
  EXPECT_THROW(sliding_window_attention(in.q, in.k, in.v, one, {0}, 0, 0.3), c10::Error);
  EXPECT_THROW(sliding_window_attention(in.q, in.k, in.v, one, {4, 4}, 0, 0.3), c10::Error);
  EXPECT_THROW(sliding_window_attention(in.q, in.k, in.v, one, {4}, -1, 0.3), c10::Error);
  const at::Tensor three_heads = in.k.narrow(1, 0, 1).repeat({1, 3, 1});  // 4 query heads: not a multiple
  EXPECT_THROW(sliding_window_attention(in.q, three_heads, three_heads, one, {4}, 0, 0.3), c10::Error);
  EXPECT_THROW(SlidingWindowAttention(SlidingWindowOptions{0, 4, 64}), std::invalid_argument);
  EXPECT_THROW(SlidingWindowAttention(SlidingWindowOptions{8, -1, 64}), std::invalid_argument);
}

// Decoding: a prefill of the whole prompt, then one step per new token against the cache,
// equals the reference's last rows of the grown sequence, at the request's window.
TEST(SlidingWindowAttention, CachedPrefillAndStepsEqualTheReferenceRows) {
  const int64_t prompt = 90, steps = 5, window = 20, sinks = 3;
  const Inputs in = inputs(prompt + steps, 4, 2, 8, 9);
  SlidingWindowAttention backend(SlidingWindowOptions{512, sinks, 64});
  AttentionBudgetRequest request;
  request.top_k = {window};
  backend.set_budget_request(request);
  const at::Tensor prefill = backend.forward_cached(in.q.narrow(0, 0, prompt), in.k.narrow(0, 0, prompt),
                                                    in.v.narrow(0, 0, prompt), 0.3);
  EXPECT_LT(max_diff(prefill, sliding_window_reference(in.q.narrow(0, 0, prompt), in.k.narrow(0, 0, prompt),
                                                       in.v.narrow(0, 0, prompt), PackedSequences::from_lengths({prompt}),
                                                       {window}, sinks, 0.3)
                                  .out),
            1e-12);
  for (int64_t t = prompt; t < prompt + steps; ++t) {
    const at::Tensor step =
        backend.forward_cached(in.q.narrow(0, t, 1), in.k.narrow(0, 0, t + 1), in.v.narrow(0, 0, t + 1), 0.3);
    const at::Tensor want = sliding_window_reference_rows(in.q.narrow(0, 0, t + 1), in.k.narrow(0, 0, t + 1),
                                                          in.v.narrow(0, 0, t + 1), window, sinks, 0.3, t);
    EXPECT_LT(max_diff(step, want), 1e-12) << "step at position " << t;
  }
  // Two queries at once against the cache (speculative steps): rows L - 2 and L - 1.
  const int64_t length = prompt + steps;
  const at::Tensor two = backend.forward_cached(in.q.narrow(0, length - 2, 2), in.k, in.v, 0.3);
  EXPECT_LT(max_diff(two, sliding_window_reference_rows(in.q, in.k, in.v, window, sinks, 0.3, length - 2)), 1e-12);
}

}  // namespace
}  // namespace sb
