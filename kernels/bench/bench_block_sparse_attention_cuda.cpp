// MoBA on CUDA through the fused block-sparse kernels beside LibTorch's dense attention
// (scaled_dot_product_attention, causal) on the same inputs: forward and
// forward+backward, each timed with CUDA events around the call the trainer makes (the
// attention backend's forward: MoBA's device routing and its host statistics included).
// One packed sequence, bf16, 14/2 heads, head_dim 64 (Qwen2.5-0.5B), q, k, v ~ N(0, 1)
// as `bench attention --inputs random`. Args: len (tokens); MoBA: block (tokens per key
// block), k (blocks per query block, diagonal included); dense: flash_only (0: the
// kernel SDPA picks, as the trainer and `bench attention` run it, which on an H100 with
// LibTorch 2.11 is cuDNN's; 1: SDPA restricted to flash-attention). The label names the
// kernel SDPA chose. Counters, as `bench attention` defines them (attention_benchmark.h):
// FLOP/s = 4 D attended_pairs (forward; x 3.5 with the backward) per second on the pairs
// the run attends; ideal = dense pairs / MoBA's pairs, the speed-up a kernel at dense's
// FLOP rate would reach. Without a CUDA device every case skips with a message.

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <benchmark/benchmark.h>
#include <c10/core/GradMode.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>

#include <cmath>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention/patterns/dense/dense_pattern.h"
#include "kernels/attention/patterns/moba/moba_pattern.h"
#include "kernels/attention/core/attention_backend.h"
#include "kernels/attention/attention_benchmark.h"
#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/core/sdpa_kernel_choice.h"

namespace sb {
namespace {

constexpr int64_t kQHeads = 14, kKvHeads = 2, kDim = 64;
constexpr int kWarmup = 2;

struct BlockSparseBenchInput {
  PackedSequences packed;
  double scale = 1.0;
  at::Tensor q, k, v, grad_out;
};

BlockSparseBenchInput block_sparse_bench_input(int64_t length) {
  BlockSparseBenchInput in;
  in.packed = PackedSequences::from_lengths({length});
  in.scale = 1.0 / std::sqrt(static_cast<double>(kDim));
  at::manual_seed(0);
  const auto options = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  in.q = at::randn({length, kQHeads, kDim}, options);   // [L, Hq, D]
  in.k = at::randn({length, kKvHeads, kDim}, options);  // [L, Hkv, D]
  in.v = at::randn({length, kKvHeads, kDim}, options);  // [L, Hkv, D]
  in.grad_out = at::randn_like(in.q);                   // [L, Hq, D]
  return in;
}

// The work `bench attention` counts for these pairs (its FLOP formulas).
double attention_flop(double attended_pairs, bool backward) {
  AttentionBenchResult work;
  work.config.head_dim = kDim;
  work.attended_pairs = attended_pairs;
  return backward ? work.fwdbwd_flop() : work.fwd_flop();
}

// Times backend->forward (and the backward of its output) with CUDA events per
// iteration; skips the case when there is no device or the first call fails.
void run_attention_cuda(benchmark::State& state, const AttentionOptions& options, bool backward) {
  if (c10::cuda::device_count() == 0) {
    state.SkipWithError("no CUDA device: the dense SDPA and fused block-sparse cases need one "
                        "(sm_80 or later)");
    return;
  }
  const bool dense = options.budget_axis() == BudgetAxis::kNone;
  const SdpaFlashOnlyScope sdpa(dense && state.range(1) != 0);
  const int64_t length = state.range(0);
  const std::unique_ptr<AttentionBackend> backend = options.make_backend();
  BlockSparseBenchInput in;
  double pairs = 0.0;
  auto call = [&] {
    if (!backward) {
      const c10::NoGradGuard no_grad;
      benchmark::DoNotOptimize(backend->forward(in.q, in.k, in.v, in.packed, in.scale, 0).data_ptr());
      return;
    }
    const at::Tensor q = in.q.detach().requires_grad_(true);
    const at::Tensor k = in.k.detach().requires_grad_(true);
    const at::Tensor v = in.v.detach().requires_grad_(true);
    backend->forward(q, k, v, in.packed, in.scale, 0).backward(in.grad_out);
    benchmark::DoNotOptimize(k.grad().data_ptr());
  };
  try {
    in = block_sparse_bench_input(length);
    pairs = options.pattern().kept_pairs(in.q, in.k, in.packed, in.scale);
    if (dense) state.SetLabel("sdpa: " + dense_sdpa_kernel(in.q, in.k, in.v, in.scale));
    for (int i = 0; i < kWarmup; ++i) call();
    c10::cuda::device_synchronize();
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("setup failed: ") + e.what()).c_str());
    return;
  }
  c10::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
  const auto stream = at::cuda::getCurrentCUDAStream();
  for (auto _ : state) {
    start.record(stream);
    call();
    stop.record(stream);
    stop.synchronize();
    state.SetIterationTime(static_cast<double>(start.elapsed_time(stop)) / 1e3);
  }
  const auto iterations = static_cast<double>(state.iterations());
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(length) * iterations, benchmark::Counter::kIsRate);
  state.counters["FLOP/s"] =
      benchmark::Counter(attention_flop(pairs, backward) * iterations, benchmark::Counter::kIsRate);
  state.counters["ideal"] = dense_causal_attended_pairs(kQHeads, length) / pairs;
}

AttentionOptions dense_options() { return dense_attention_options(); }

AttentionOptions moba_fused_options(const benchmark::State& state) {
  MobaOptions options;
  options.block_size = state.range(1);
  options.top_k = state.range(2);
  options.cuda_kernel = MobaCudaKernel::kFused;
  return moba_attention_options(options);
}

void BM_BlockSparseCudaDenseForward(benchmark::State& s) {
  run_attention_cuda(s, dense_options(), false);
}
void BM_BlockSparseCudaDenseForwardBackward(benchmark::State& s) {
  run_attention_cuda(s, dense_options(), true);
}
void BM_BlockSparseCudaMobaFusedForward(benchmark::State& s) {
  run_attention_cuda(s, moba_fused_options(s), false);
}
void BM_BlockSparseCudaMobaFusedForwardBackward(benchmark::State& s) {
  run_attention_cuda(s, moba_fused_options(s), true);
}

void dense_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"len", "flash_only"});
  b->ArgsProduct({{16384, 65536}, {0, 1}});
  b->UseManualTime();
  b->Unit(benchmark::kMillisecond);
}

void moba_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"len", "block", "k"});
  b->ArgsProduct({{16384, 65536}, {64, 128, 256}, {8}});
  b->UseManualTime();
  b->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_BlockSparseCudaDenseForward)->Apply(dense_shapes);
BENCHMARK(BM_BlockSparseCudaDenseForwardBackward)->Apply(dense_shapes);
BENCHMARK(BM_BlockSparseCudaMobaFusedForward)->Apply(moba_shapes);
BENCHMARK(BM_BlockSparseCudaMobaFusedForwardBackward)->Apply(moba_shapes);

}  // namespace
}  // namespace sb
