#include "kernels/attention/attention_benchmark.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <stdexcept>
#include <memory>
#include <string>

#ifdef SB_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "kernels/attention/attended_pairs.h"
#include "kernels/attention/attention_backend.h"
#include "kernels/attention/moba/moba_attention.h"
#include "kernels/attention/moba/moba_reference.h"
#include "kernels/attention/ring/ring_attention_backend.h"
#include "kernels/attention/ring/ring_vertical_slash_index.h"
#include "kernels/attention/sdpa_kernel_choice.h"
#include "kernels/attention/vertical_slash/vertical_slash_backend.h"
#include "kernels/attention/vertical_slash/vertical_slash_blocks.h"
#include "kernels/attention/vertical_slash/vertical_slash_reference.h"

namespace sb {
namespace {

// Float64 scores the oracle may hold at once for the error check (about 4 tensors of
// [Hq, rows, L] doubles).
constexpr int64_t kReferenceBytes = int64_t{1} << 30;

// "ring-dense", "ring-moba" and "ring-vertical_slash": the context-parallel ring
// (kernels/attention/ring) on one rank, i.e. its step kernels, merge and (vertical-slash)
// its index built as the CP ranks build it, against the one-rank implementations.
bool is_ring(const std::string& impl) {
  return impl == "ring-dense" || impl == "ring-moba" || impl == "ring-vertical_slash";
}
// "moba" runs the default CUDA path (the fused kernels where they apply); "moba-fused" and
// "moba-varlen" force one of the two (MobaCudaKernel), to compare them side by side.
bool is_moba(const std::string& impl) {
  return impl == "moba" || impl == "ring-moba" || impl == "moba-fused" || impl == "moba-varlen";
}
MobaCudaKernel moba_cuda_kernel_of(const std::string& impl) {
  if (impl == "moba-fused") return MobaCudaKernel::kFused;
  if (impl == "moba-varlen") return MobaCudaKernel::kFlashVarlen;
  return MobaCudaKernel::kAuto;
}
bool is_vertical_slash(const std::string& impl) { return impl == "vertical_slash" || impl == "ring-vertical_slash"; }
// "dense" lets SDPA choose its kernel (as the trainer runs it; cuDNN's on an H100);
// "dense-flash" pins it to flash-attention (sdpa_kernel_choice.h).
bool is_dense(const std::string& impl) { return impl == "dense" || impl == "dense-flash"; }

// MTraining's pattern with fixed counts (top-k) or top-p, the public code's sinks and window.
VerticalSlashParams vertical_slash_params(const AttentionBenchConfig& c) {
  VerticalSlashParams p;
  p.budget = c.vs_p > 0 ? VerticalSlashBudget::kTopP : VerticalSlashBudget::kTopK;
  if (c.vs_p > 0) p.p = c.vs_p;
  p.block_size = c.vs_block;
  p.vertical_count = c.vs_verticals;
  p.slash_count = c.vs_slashes;
  p.max_verticals = std::max<int64_t>(p.max_verticals, p.sink_tokens + c.vs_verticals);
  p.max_slashes = std::max<int64_t>(p.max_slashes, p.local_window + c.vs_slashes);
  return p;
}

// "local" inputs: how far the shared direction stands out of the noise, and the RoPE base
// (Qwen2.5's). At strength 1.5 the last 64 queries of an 8K sequence put about 0.9 of
// their attention within 100 tokens of themselves; at 1.0 it spreads over the sequence.
constexpr double kLocalStrength = 1.5;
constexpr double kLocalRopeBase = 1e6;

// x [L, H, D] float64 rotated by RoPE at positions 0 .. L - 1: the halves (d, d + D/2)
// turn by position x base^(-2d / D), as Qwen2 rotates q and k.
at::Tensor rotate_by_position(const at::Tensor& x) {
  const int64_t length = x.size(0), half = x.size(2) / 2;
  const at::Tensor inverse = at::pow(kLocalRopeBase, at::arange(half, at::kDouble) * (-2.0 / static_cast<double>(x.size(2))));
  const at::Tensor angle = at::arange(length, at::kDouble).unsqueeze(1) * inverse.unsqueeze(0);  // [L, half]
  const at::Tensor cos = angle.cos().unsqueeze(1), sin = angle.sin().unsqueeze(1);           // [L, 1, half]
  const at::Tensor x1 = x.narrow(2, 0, half), x2 = x.narrow(2, half, half);
  return at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, 2);
}

// [L, H, D]: head h's direction (one per key/value head, shared by its query heads) times
// kLocalStrength plus N(0, 1) noise, rotated by position.
at::Tensor local_inputs(int64_t length, const at::Tensor& directions, int64_t heads) {
  const int64_t group = heads / directions.size(0);
  const at::Tensor shared = directions.repeat_interleave(group, 0).unsqueeze(0) * kLocalStrength;  // [1, H, D]
  return rotate_by_position(shared + at::randn({length, heads, directions.size(1)}, at::kDouble));
}

void check_config(const AttentionBenchConfig& c) {
  auto fail = [](const std::string& what) { throw std::invalid_argument(what); };
  if (!is_dense(c.impl) && !is_moba(c.impl) && !is_ring(c.impl) && !is_vertical_slash(c.impl)) {
    fail("--impl must be dense, dense-flash, moba, moba-fused, moba-varlen, ring-dense, ring-moba, "
         "ring-vertical_slash or vertical_slash, got " + c.impl);
  }
  if (c.impl == "dense-flash" && c.device != "cuda") fail("--impl dense-flash is a CUDA kernel: use --device cuda");
  if (moba_cuda_kernel_of(c.impl) != MobaCudaKernel::kAuto && c.device != "cuda") {
    fail("--impl " + c.impl + " chooses a CUDA path: use --device cuda (or --impl moba)");
  }
  if (is_vertical_slash(c.impl) && c.device == "cuda" &&
      !((c.dtype == at::kBFloat16 || c.dtype == at::kHalf) && (c.head_dim == 64 || c.head_dim == 128))) {
    fail("--impl vertical_slash on CUDA runs the fused block-sparse kernels: --dtype bfloat16 or float16 and "
         "--head-dim 64 or 128");
  }
  if (c.vs_verticals < 0 || c.vs_slashes < 0) fail("--vs-verticals and --vs-slashes must be >= 0");
  if (c.vs_block < 1) fail("--vs-block must be >= 1");
  if (!(c.vs_p >= 0 && c.vs_p <= 1)) fail("--vs-p must be in [0, 1] (0: top-k counts)");
  if (c.inputs != "random" && c.inputs != "local") fail("--inputs must be random or local, got " + c.inputs);
  if (c.inputs == "local" && c.head_dim % 2 != 0) fail("--inputs local rotates pairs of dimensions: --head-dim must be even");
  if (c.device != "cpu" && c.device != "cuda") fail("--device must be cpu or cuda, got " + c.device);
  if (is_ring(c.impl) && c.device != "cpu") fail("--impl " + c.impl + " runs on the CPU only (--device cpu)");
  if (c.seq_len < 1) fail("--seq-len must be >= 1");
  if (c.block < 1) fail("--block must be >= 1");
  if (c.top_k < 1) fail("--top-k must be >= 1");
  if (c.q_heads < 1 || c.kv_heads < 1 || c.q_heads % c.kv_heads != 0) {
    fail("--heads HQ/HKV needs HQ a positive multiple of HKV, got " + std::to_string(c.q_heads) +
         "/" + std::to_string(c.kv_heads));
  }
  if (c.head_dim < 1) fail("--head-dim must be >= 1");
  if (c.repetitions < 1) fail("--repetitions must be >= 1");
  if (c.warmup < 0) fail("--warmup must be >= 0");
#ifdef SB_WITH_CUDA
  if (c.device == "cuda" && c10::cuda::device_count() == 0) {
    fail("--device cuda: no CUDA device is visible");
  }
#else
  if (c.device == "cuda") fail("--device cuda: this build has no CUDA support (SB_CUDA=OFF)");
#endif
}

int64_t proc_status_bytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::stoll(line.substr(field.size() + 1)) * 1024;  // "VmHWM:   1234 kB"
    }
  }
  return 0;
}

// The memory the timed runs hold beyond what was there when it started.
class MemoryProbe {
 public:
  explicit MemoryProbe(bool cuda) : cuda_(cuda) {
#ifdef SB_WITH_CUDA
    if (cuda_) {
      c10::cuda::device_synchronize();
      const auto device = c10::cuda::current_device();
      c10::cuda::CUDACachingAllocator::resetPeakStats(device);
      base_ = c10::cuda::CUDACachingAllocator::getDeviceStats(device)
                  .allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
                  .current;
      return;
    }
#endif
    std::ofstream("/proc/self/clear_refs") << "5";  // resets VmHWM to the current RSS
    base_ = proc_status_bytes("VmRSS");
  }
  std::string source() const { return cuda_ ? "cuda_allocator" : "cpu_rss"; }
  int64_t peak_above_start() const {
#ifdef SB_WITH_CUDA
    if (cuda_) {
      c10::cuda::device_synchronize();
      const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device());
      return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
                 .peak -
             base_;
    }
#endif
    return std::max<int64_t>(0, proc_status_bytes("VmHWM") - base_);
  }

 private:
  bool cuda_;
  int64_t base_ = 0;
};

// Wall time of fn in ms: CUDA events on the current stream for CUDA, steady clock otherwise.
double time_ms(bool cuda, const std::function<void()>& fn) {
#ifdef SB_WITH_CUDA
  if (cuda) {
    at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
    const auto stream = at::cuda::getCurrentCUDAStream();
    start.record(stream);
    fn();
    stop.record(stream);
    stop.synchronize();
    return static_cast<double>(start.elapsed_time(stop));
  }
#endif
  const auto begin = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
}

MobaParams reference_params(const AttentionBenchConfig& c, double scale) {
  MobaParams params;
  params.block_size = c.block;
  // Dense causal attention is MoBA with every block selected.
  params.top_k = {!is_moba(c.impl) ? (c.seq_len + c.block - 1) / c.block : c.top_k};
  params.scale = scale;
  params.cuda_kernel = moba_cuda_kernel_of(c.impl);
  return params;
}

}  // namespace


namespace {

// One implementation under test: its inputs, backend and result.
struct BenchSubject {
  AttentionBenchResult result;
  PackedSequences packed;
  MobaParams params;
  double scale = 1.0;
  bool cuda = false;
  at::Tensor q, k, v, grad_out, last_out;
  std::unique_ptr<AttentionBackend> backend;
  std::shared_ptr<RingContext> ring_context;           // ring-*: the one rank's
  std::shared_ptr<const RingGeometry> ring_geometry;  // ring-vertical_slash: what its index reads

  explicit BenchSubject(const AttentionBenchConfig& config) {
    check_config(config);
    result.config = config;
    cuda = config.device == "cuda";
    const auto options = at::TensorOptions()
                             .dtype(config.dtype)
                             .device(cuda ? at::Device(at::kCUDA) : at::Device(at::kCPU));
    const int64_t length = config.seq_len;
    scale = 1.0 / std::sqrt(static_cast<double>(config.head_dim));
    packed = PackedSequences::from_lengths({length});
    at::manual_seed(config.seed);
    if (config.inputs == "local") {
      const at::Tensor directions = at::randn({config.kv_heads, config.head_dim}, at::kDouble);
      q = local_inputs(length, directions, config.q_heads).to(options);   // [L, Hq, D]
      k = local_inputs(length, directions, config.kv_heads).to(options);  // [L, Hkv, D]
    } else {
      q = at::randn({length, config.q_heads, config.head_dim}, options);   // [L, Hq, D]
      k = at::randn({length, config.kv_heads, config.head_dim}, options);  // [L, Hkv, D]
    }
    v = at::randn({length, config.kv_heads, config.head_dim}, options);  // [L, Hkv, D]
    grad_out = at::randn_like(q);
    AttentionOptions attention{is_moba(config.impl) ? AttentionKind::kMoba : AttentionKind::kDense,
                               config.block, config.top_k};
    attention.moba_cuda_kernel = moba_cuda_kernel_of(config.impl);
    if (is_ring(config.impl)) {
      if (is_vertical_slash(config.impl)) {  // the ring's blocks are the pattern's
        attention.kind = AttentionKind::kVerticalSlash;
        attention.block_size = config.vs_block;
        attention.vertical_slash = vertical_slash_params(config);
      }
      ring_context = std::make_shared<RingContext>(nullptr, 0, 1, 0, std::chrono::milliseconds(60000));
      if (is_vertical_slash(config.impl)) {  // built once, as the backend builds it once per call
        ring_geometry = RingGeometry::build(CpSharding::build(packed, 1, {}), config.vs_block, false);
      }
      auto ring = std::make_unique<RingAttentionBackend>(attention, ring_context);
      ring->set_context_parallel_sharding(std::make_shared<const CpSharding>(CpSharding::build(packed, 1, {})));
      backend = std::move(ring);
    } else if (is_vertical_slash(config.impl)) {
      backend = std::make_unique<VerticalSlashAttention>(vertical_slash_params(config));
    } else {
      backend = make_attention_backend(attention);
    }
    params = reference_params(config, scale);
    if (is_dense(config.impl)) {
      const SdpaFlashOnlyScope sdpa(config.impl == "dense-flash");
      result.sdpa_kernel = dense_sdpa_kernel(q, k, v, scale);
    }
    if (is_moba(config.impl)) {
      result.attended_pairs = moba_attended_pairs(q, k, packed, params);
    } else if (is_vertical_slash(config.impl)) {  // the mask of the index every run builds
      result.attended_pairs = 0;
      const auto index = vertical_slash_index(q.cpu(), k.cpu(), packed, vertical_slash_params(config), scale);
      for (const auto& head : index.front()) {
        result.attended_pairs += static_cast<double>(vertical_slash_kept_pairs(head, length));
      }
    } else {
      result.attended_pairs = dense_causal_attended_pairs(config.q_heads, length);
    }
  }

  double forward() {
    const SdpaFlashOnlyScope sdpa(result.config.impl == "dense-flash");
    return time_ms(cuda, [&] {
      const c10::NoGradGuard no_grad;
      last_out = backend->forward(q, k, v, packed, scale, /*layer=*/0);
    });
  }
  double forward_backward() {
    const at::Tensor ql = q.detach().requires_grad_(true);
    const at::Tensor kl = k.detach().requires_grad_(true);
    const at::Tensor vl = v.detach().requires_grad_(true);
    const SdpaFlashOnlyScope sdpa(result.config.impl == "dense-flash");
    return time_ms(cuda, [&] {
      backend->forward(ql, kl, vl, packed, scale, /*layer=*/0).backward(grad_out);
    });
  }
  void run_once(bool measured) {
    const double fwd = forward();
    if (measured) result.fwd_ms.push_back(fwd);
    if (is_vertical_slash(result.config.impl)) {
      const double index = time_ms(cuda, [&] {
        if (is_ring(result.config.impl)) {  // as the CP ranks build it (ring_vertical_slash_sums.h)
          ring_vertical_slash_index(q, k, *ring_geometry, vertical_slash_params(result.config), scale, *ring_context, 0);
          ring_context->take_events();
        } else {
          vertical_slash_index(q, k, packed, vertical_slash_params(result.config), scale);
        }
      });
      if (measured) result.index_ms.push_back(index);
    }
    if (result.config.backward) {
      const double fwdbwd = forward_backward();
      if (measured) result.fwdbwd_ms.push_back(fwdbwd);
    }
    const auto stats = backend->take_layer_stats();
    if (!stats.empty()) result.coverage_mean = stats.front().coverage_mean;
  }

  // The last rows attend the most keys; check as many as the oracle's memory allows.
  void check_against_reference() {
    const AttentionBenchConfig& c = result.config;
    const int64_t length = c.seq_len;
    const int64_t affordable = std::max<int64_t>(1, kReferenceBytes / (32 * c.q_heads * length));
    result.checked_rows = std::min(length, c.check_rows > 0 ? c.check_rows : affordable);
    const int64_t first_row = length - result.checked_rows;
    if (is_vertical_slash(c.impl)) {  // the same index, densely, on the last rows
      const auto index = vertical_slash_index(q, k, packed, vertical_slash_params(c), scale);
      const at::Tensor reference =
          vertical_slash_reference_rows(q.cpu(), k.cpu(), v.cpu(), index.front(), scale, first_row);
      result.max_abs_err =
          (last_out.narrow(0, first_row, result.checked_rows).cpu().to(at::kDouble) - reference).abs().max().item<double>();
      return;
    }
    const MobaReferenceResult reference =
        moba_reference(q.cpu(), k.cpu(), v.cpu(), packed, packed, params, first_row, length);
    result.max_abs_err = (last_out.narrow(0, first_row, result.checked_rows).cpu().to(at::kDouble) -
                          reference.out)
                             .abs()
                             .max()
                             .item<double>();
  }
};

}  // namespace

std::vector<AttentionBenchResult> run_attention_benchmarks(
    const std::vector<AttentionBenchConfig>& configs) {
  std::vector<std::unique_ptr<BenchSubject>> subjects;
  for (const AttentionBenchConfig& config : configs) {
    subjects.push_back(std::make_unique<BenchSubject>(config));
  }
  // First run of each subject, alone and untimed: its memory.
  for (auto& subject : subjects) {
    const MemoryProbe memory(subject->cuda);
    subject->run_once(/*measured=*/false);
    subject->result.peak_mem_bytes = memory.peak_above_start();
    subject->result.peak_mem_source = memory.source();
  }
  // Warm-up, then timed repetitions, the subjects taking turns so that a change in the
  // machine's load hits all of them alike.
  const int64_t warmup = configs.empty() ? 0 : configs.front().warmup;
  const int64_t repetitions = configs.empty() ? 0 : configs.front().repetitions;
  for (int64_t rep = 1; rep < warmup + repetitions + 1; ++rep) {
    for (auto& subject : subjects) subject->run_once(/*measured=*/rep > warmup);
  }
  std::vector<AttentionBenchResult> results;
  for (auto& subject : subjects) {
    subject->check_against_reference();
    results.push_back(subject->result);
  }
  return results;
}

}  // namespace sb
