// Sliding-window attention on a GPU (label cuda; exits 77 without one, cuda_test_main.cpp):
// the kernel's ATen calls on CUDA tensors against the float64 reference on the same
// rounded inputs (output and q/k/v gradients, bf16 and fp32, GQA, packing, a window
// covering its sequence), decoding steps, the backend's windows, floor and coverage equal
// to the CPU backend's, and the GPU ring refusing the band.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention/patterns/sliding_window/sliding_window_attention.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_backend.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_pattern.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_reference.h"
#include "kernels/attention/ring/cp_sharding.h"
#include "kernels/attention/ring/ring_attention_backend.h"
#include "tests/support/tensor_compare.h"

namespace sb {
namespace {

struct Gradients {
  at::Tensor out, dq, dk, dv;
};

template <typename Attend>
Gradients run_backward(const at::Tensor& q0, const at::Tensor& k0, const at::Tensor& v0, const at::Tensor& grad, Attend attend) {
  at::Tensor q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true), v = v0.clone().requires_grad_(true);
  const at::Tensor out = attend(q, k, v);
  (out.to(at::kFloat) * grad.to(out.device()).to(at::kFloat)).sum().backward();
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

TEST(SlidingWindowCuda, KernelEqualsTheFloat64Reference) {
  const std::vector<int64_t> lengths{1000, 0, 300, 90};
  const std::vector<int64_t> windows{256, 5, 64, 200};  // the last covers its sequence
  const PackedSequences sequences = PackedSequences::from_lengths(lengths);
  for (const auto& [dtype, bound] : std::vector<std::pair<at::ScalarType, double>>{{at::kBFloat16, 2e-2}, {at::kFloat, 1e-5}}) {
    for (const auto& [q_heads, kv_heads, dim] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{14, 2, 64}, {4, 4, 128}}) {
      at::manual_seed(5);
      const int64_t tokens = sequences.total_tokens();
      const at::Tensor q = at::randn({tokens, q_heads, dim}).to(dtype), k = at::randn({tokens, kv_heads, dim}).to(dtype),
                       v = at::randn({tokens, kv_heads, dim}).to(dtype), grad = at::randn({tokens, q_heads, dim});
      const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
      const auto kernel = [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
        return sliding_window_attention(a, b, c, sequences, windows, 4, scale);
      };
      const Gradients gpu = run_backward(q.cuda(), k.cuda(), v.cuda(), grad, kernel);
      const Gradients want = run_backward(q.to(at::kDouble), k.to(at::kDouble), v.to(at::kDouble), grad.to(at::kDouble),
                           [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
                             return sliding_window_reference(a, b, c, sequences, windows, 4, scale).out;
                           });
      const std::string what = std::string(c10::toString(dtype)) + " heads " + std::to_string(q_heads) + "/" +
                               std::to_string(kv_heads) + " D " + std::to_string(dim);
      EXPECT_EQ(gpu.out.scalar_type(), dtype) << what;
      EXPECT_LT(test::relative_norm_error(gpu.out, want.out), bound) << what;
      EXPECT_LT(test::relative_norm_error(gpu.dq, want.dq), bound) << what;
      EXPECT_LT(test::relative_norm_error(gpu.dk, want.dk), bound) << what;
      EXPECT_LT(test::relative_norm_error(gpu.dv, want.dv), bound) << what;
    }
  }
}

TEST(SlidingWindowCuda, BackendMatchesTheCpuBackendAndDecodes) {
  const std::vector<int64_t> lengths{700, 150};
  const PackedSequences sequences = PackedSequences::from_lengths(lengths);
  at::manual_seed(6);
  const at::Tensor q = at::randn({850, 4, 64}).mul(3), k = at::randn({850, 2, 64}), v = at::randn({850, 2, 64});
  AttentionBudgetRequest request;
  request.top_k = {8, 300};
  request.coverage_floor_ratio = 0.9;
  request.coverage_reference_k = 256;
  SlidingWindowAttention cpu(SlidingWindowOptions{256, 4, 64}), gpu(SlidingWindowOptions{256, 4, 64});
  cpu.set_budget_request(request);
  gpu.set_budget_request(request);
  const at::Tensor want = cpu.forward(q, k, v, sequences, 0.125, 0);
  const at::Tensor got = gpu.forward(q.cuda(), k.cuda(), v.cuda(), sequences, 0.125, 0);
  const AttentionLayerStats a = cpu.take_layer_stats().at(0), b = gpu.take_layer_stats().at(0);
  EXPECT_EQ(b.top_k, a.top_k);
  EXPECT_EQ(b.k_floor, a.k_floor);
  EXPECT_NEAR(b.coverage_mean, a.coverage_mean, 1e-9);
  EXPECT_LT(test::relative_norm_error(got, want), 1e-5);

  SlidingWindowAttention decoder(SlidingWindowOptions{64, 4, 64});
  const int64_t t = 699;  // the first sequence's last token against its cache
  const at::Tensor step = decoder.forward_cached(q.narrow(0, t, 1).cuda(), k.narrow(0, 0, t + 1).cuda(),
                                                 v.narrow(0, 0, t + 1).cuda(), 0.125);
  const at::Tensor rows =
      sliding_window_reference_rows(q.narrow(0, 0, t + 1), k.narrow(0, 0, t + 1), v.narrow(0, 0, t + 1), 64, 4, 0.125, t);
  EXPECT_LT(test::relative_norm_error(step, rows), 1e-5);
}

TEST(SlidingWindowCuda, TheGpuRingRefusesTheBand) {
  const PackedSequences sequences = PackedSequences::from_lengths({300});
  auto context = std::make_shared<RingContext>(nullptr, 0, 1, 0, std::chrono::milliseconds(1000));
  RingAttentionBackend ring(SlidingWindowPattern(SlidingWindowOptions{64, 4, 64}).make_ring_selector(), context);
  ring.set_context_parallel_sharding(
      std::make_shared<const CpSharding>(CpSharding::build(sequences, 1, {CpLayoutKind::kZigzag, 0})));
  const at::Tensor q = at::randn({300, 4, 64}, at::device(at::kCUDA).dtype(at::kBFloat16));
  const at::Tensor k = at::randn({300, 2, 64}, q.options()), v = at::randn({300, 2, 64}, q.options());
  try {
    ring.forward(q, k, v, sequences, 0.125, 0);
    FAIL() << "the GPU ring ran a band";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("CPU ring only"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sb
