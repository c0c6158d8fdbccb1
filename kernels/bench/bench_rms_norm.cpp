// RMSNorm forward: the float64 reference on CPU and, in CUDA builds, the fused kernel
// (timed with CUDA events). Args: rows, hidden. tokens/s = rows per second.

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#ifdef SB_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "kernels/bench/rms_norm/rms_norm.h"

namespace sb {
namespace {

void set_tokens_per_second(benchmark::State& state, int64_t rows) {
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(rows) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

void BM_RmsNormReferenceCpu(benchmark::State& state) {
  const int64_t rows = state.range(0), hidden = state.range(1);
  at::manual_seed(0);
  const at::Tensor x = at::randn({rows, hidden});  // [N, H]
  const at::Tensor w = at::randn({hidden});        // [H]
  for (auto _ : state) {
    at::Tensor y = rms_norm_reference(x, w, 1e-6);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  set_tokens_per_second(state, rows);
}
BENCHMARK(BM_RmsNormReferenceCpu)
    ->ArgNames({"rows", "hidden"})
    ->Args({512, 896})
    ->Args({4096, 896})
    ->Args({4096, 2048})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

#ifdef SB_WITH_CUDA
// Args: rows, hidden, dtype (0 float32, 1 float16, 2 bfloat16).
void BM_RmsNormCuda(benchmark::State& state) {
  if (c10::cuda::device_count() == 0) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t rows = state.range(0), hidden = state.range(1);
  at::ScalarType dtype = at::kFloat;
  switch (state.range(2)) {
    case 0:
      dtype = at::kFloat;
      break;
    case 1:
      dtype = at::kHalf;
      break;
    case 2:
      dtype = at::kBFloat16;
      break;
    default:
      state.SkipWithError("unknown dtype index");
      return;
  }
  state.SetLabel(c10::toString(dtype));
  at::manual_seed(0);
  const auto options = at::TensorOptions().device(at::kCUDA).dtype(dtype);
  const at::Tensor x = at::randn({rows, hidden}, options);        // [N, H]
  const at::Tensor w = at::randn({hidden}, options);              // [H]
  for (int i = 0; i < 3; ++i) rms_norm_forward_cuda(x, w, 1e-6);  // warm-up
  c10::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
  const auto stream = at::cuda::getCurrentCUDAStream();
  for (auto _ : state) {
    start.record(stream);
    at::Tensor y = rms_norm_forward_cuda(x, w, 1e-6);
    stop.record(stream);
    stop.synchronize();
    state.SetIterationTime(static_cast<double>(start.elapsed_time(stop)) / 1e3);
  }
  set_tokens_per_second(state, rows);
  // Bytes moved: x read twice (L2 serves the second pass on these sizes), y written once.
  state.counters["bytes/s"] = benchmark::Counter(
      2.0 * static_cast<double>(x.nbytes()) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_RmsNormCuda)
    ->ArgNames({"rows", "hidden", "dtype"})
    ->ArgsProduct({{4096, 32768}, {896, 2048, 3584}, {0, 2}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
#endif

}  // namespace
}  // namespace sb
