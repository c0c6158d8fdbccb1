// MoBA on the CPU over (sequence length, k): the custom autograd function in the code
// path (moba_attention), the composed-ATen experiment (moba_composed_aten.h) and dense
// causal attention on the same shape, forward and forward+backward. Block 64, heads 4/2,
// head_dim 64. The composed variant's max abs difference from the kernel is reported
// as a counter (it must be ~1e-6: both compute the same attention in float32).

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <functional>

#include "kernels/attention/core/attention_backend.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"
#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/core/block_layout.h"
#include "kernels/bench/moba_composed_aten.h"

namespace sb {
namespace {

constexpr int64_t kBlock = 64, kQHeads = 4, kKvHeads = 2, kDim = 64;

struct MobaBenchInput {
  PackedSequences packed;
  MobaParams params;
  at::Tensor q, k, v, grad_out;
};

MobaBenchInput moba_bench_input(int64_t length, int64_t top_k) {
  MobaBenchInput in;
  in.packed = PackedSequences::from_lengths({length});
  in.params.block_size = kBlock;
  in.params.top_k = {top_k};
  in.params.scale = 1.0 / std::sqrt(static_cast<double>(kDim));
  at::manual_seed(0);
  in.q = at::randn({length, kQHeads, kDim});
  in.k = at::randn({length, kKvHeads, kDim});
  in.v = at::randn({length, kKvHeads, kDim});
  in.grad_out = at::randn({length, kQHeads, kDim});
  return in;
}

// out = attention(q, k, v) for the variant under test.
using Attention = std::function<at::Tensor(const MobaBenchInput&, const at::Tensor&,
                                           const at::Tensor&, const at::Tensor&)>;

at::Tensor moba_kernel(const MobaBenchInput& in, const at::Tensor& q, const at::Tensor& k,
                       const at::Tensor& v) {
  return moba_attention(q, k, v, in.packed, in.params).out;
}

at::Tensor moba_composed(const MobaBenchInput& in, const at::Tensor& q, const at::Tensor& k,
                         const at::Tensor& v) {
  const BlockLayout layout = BlockLayout::build(in.packed, in.packed, kBlock, true);
  MobaRouting routing;
  {
    const c10::NoGradGuard no_grad;
    routing = moba_route_cpu(q.detach(), k.detach(), layout, in.params);
  }
  return moba_attention_composed_aten(q, k, v, layout, routing, in.params.scale);
}

at::Tensor dense(const MobaBenchInput& in, const at::Tensor& q, const at::Tensor& k,
                 const at::Tensor& v) {
  return dense_attention_options().make_backend()->forward(q, k, v, in.packed, in.params.scale, 0);
}

void run_attention(benchmark::State& state, const Attention& attention, bool backward,
                   bool report_difference_from_kernel = false) {
  const MobaBenchInput in = moba_bench_input(state.range(0), state.range(1));
  if (report_difference_from_kernel) {
    const c10::NoGradGuard no_grad;
    state.counters["max_diff_vs_kernel"] =
        (attention(in, in.q, in.k, in.v) - moba_kernel(in, in.q, in.k, in.v)).abs().max().item<double>();
  }
  for (auto _ : state) {
    if (!backward) {
      const c10::NoGradGuard no_grad;
      benchmark::DoNotOptimize(attention(in, in.q, in.k, in.v).data_ptr());
      continue;
    }
    const at::Tensor q = in.q.detach().requires_grad_(true);
    const at::Tensor k = in.k.detach().requires_grad_(true);
    const at::Tensor v = in.v.detach().requires_grad_(true);
    attention(in, q, k, v).backward(in.grad_out);
    benchmark::DoNotOptimize(k.grad().data_ptr());
  }
  state.counters["tokens/s"] = benchmark::Counter(
      static_cast<double>(state.range(0)) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}

void BM_MobaCpuForward(benchmark::State& s) { run_attention(s, moba_kernel, false); }
void BM_MobaCpuForwardBackward(benchmark::State& s) { run_attention(s, moba_kernel, true); }
void BM_MobaComposedAtenForward(benchmark::State& s) { run_attention(s, moba_composed, false, true); }
void BM_MobaComposedAtenForwardBackward(benchmark::State& s) {
  run_attention(s, moba_composed, true, true);
}
void BM_DenseSameShapeForward(benchmark::State& s) { run_attention(s, dense, false); }
void BM_DenseSameShapeForwardBackward(benchmark::State& s) { run_attention(s, dense, true); }

void moba_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"len", "k"});
  b->ArgsProduct({{2048, 8192}, {4, 8, 16}});
  b->Unit(benchmark::kMillisecond);
  b->UseRealTime();
}

void dense_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"len", "k"});
  b->ArgsProduct({{2048, 8192}, {0}});
  b->Unit(benchmark::kMillisecond);
  b->UseRealTime();
}

BENCHMARK(BM_MobaCpuForward)->Apply(moba_shapes);
BENCHMARK(BM_MobaCpuForwardBackward)->Apply(moba_shapes);
BENCHMARK(BM_MobaComposedAtenForward)->Apply(moba_shapes);
BENCHMARK(BM_MobaComposedAtenForwardBackward)->Apply(moba_shapes);
BENCHMARK(BM_DenseSameShapeForward)->Apply(dense_shapes);
BENCHMARK(BM_DenseSameShapeForwardBackward)->Apply(dense_shapes);

}  // namespace
}  // namespace sb
