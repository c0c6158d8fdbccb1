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

#include "kernels/attention/core/attention_backend.h"
#include "kernels/attention/core/sdpa_kernel_choice.h"
#include "kernels/attention/ring/ring_attention.h"
#include "kernels/attention/ring/ring_attention_backend.h"

namespace sb {
namespace {

// Float64 scores the oracle may hold at once for the error check (about 4 tensors of
// [Hq, rows, L] doubles).
constexpr int64_t kReferenceBytes = int64_t{1} << 30;

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
  if (c.attention.empty()) fail("--impl " + c.impl + ": no attention pattern");
  if (c.sdpa_flash_only && c.device != "cuda") fail("--impl " + c.impl + " is a CUDA kernel: use --device cuda");
  if (c.cuda_only && c.device != "cuda") {
    fail("--impl " + c.impl + " chooses a CUDA path: use --device cuda (or --impl " + c.attention.name() + ")");
  }
  if (c.device == "cuda" && !c.ring) {
    const bool half = c.dtype == at::kBFloat16 || c.dtype == at::kHalf;
    const AttentionTrainingSetting setting{true, half, c.head_dim, half ? "bfloat16" : "float32", "--impl " + c.impl};
    if (const auto problem = c.attention.pattern().training_problem(setting)) {
      fail("--impl " + c.impl + " on CUDA: " + problem->problem + " (--dtype bfloat16 or float16; --head-dim 64 or 128)");
    }
  }
  if (c.inputs != "random" && c.inputs != "local") fail("--inputs must be random or local, got " + c.inputs);
  if (c.inputs == "local" && c.head_dim % 2 != 0) fail("--inputs local rotates pairs of dimensions: --head-dim must be even");
  if (c.device != "cpu" && c.device != "cuda") fail("--device must be cpu or cuda, got " + c.device);
  if (c.ring && c.device != "cpu") fail("--impl " + c.impl + " runs on the CPU only (--device cpu)");
  if (c.seq_len < 1) fail("--seq-len must be >= 1");
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

}  // namespace


namespace {

// One implementation under test: its inputs, backend and result.
struct BenchSubject {
  AttentionBenchResult result;
  PackedSequences packed;
  double scale = 1.0;
  bool cuda = false;
  at::Tensor q, k, v, grad_out, last_out;
  std::unique_ptr<AttentionBackend> backend;
  std::shared_ptr<AttentionBackend> ring_backend;      // ring: the backend (kept for its sharding)
  std::shared_ptr<RingContext> ring_context;           // ring: the one rank's
  std::shared_ptr<RingPatternSelector> ring_selector;  // ring: the selection timed apart
  std::shared_ptr<const RingGeometry> ring_geometry;   // ring: what the timed selection reads
  std::function<void()> selection;                     // the pattern's selection alone (or null)

  const AttentionPattern& pattern() const { return result.config.attention.pattern(); }
  AttentionBackend& run_backend() { return ring_backend ? *ring_backend : *backend; }

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
    selection = pattern().selection_step(q, k, packed, scale);
    if (config.ring) {
      ring_context = std::make_shared<RingContext>(nullptr, 0, 1, 0, std::chrono::milliseconds(60000));
      const auto sharding = std::make_shared<const CpSharding>(CpSharding::build(packed, 1, {}));
      std::shared_ptr<RingAttentionBackend> ring = make_context_parallel_backend(config.attention, ring_context);
      ring->set_context_parallel_sharding(sharding);
      ring_backend = ring;
      if (selection) {  // the selection as the CP ranks make it, its geometry built once as the backend's
        ring_selector = pattern().make_ring_selector();
        ring_geometry = RingGeometry::build(*sharding, ring_selector->block_size());
      }
    } else {
      backend = config.attention.make_backend();
    }
    if (pattern().budget_axis() == BudgetAxis::kNone) {
      const SdpaFlashOnlyScope sdpa(config.sdpa_flash_only);
      result.sdpa_kernel = dense_sdpa_kernel(q, k, v, scale);
    }
    result.attended_pairs = pattern().kept_pairs(q, k, packed, scale);
  }

  double forward() {
    const SdpaFlashOnlyScope sdpa(result.config.sdpa_flash_only);
    return time_ms(cuda, [&] {
      const c10::NoGradGuard no_grad;
      last_out = run_backend().forward(q, k, v, packed, scale, /*layer=*/0);
    });
  }
  double forward_backward() {
    const at::Tensor ql = q.detach().requires_grad_(true);
    const at::Tensor kl = k.detach().requires_grad_(true);
    const at::Tensor vl = v.detach().requires_grad_(true);
    const SdpaFlashOnlyScope sdpa(result.config.sdpa_flash_only);
    return time_ms(cuda, [&] {
      run_backend().forward(ql, kl, vl, packed, scale, /*layer=*/0).backward(grad_out);
    });
  }
  void run_once(bool measured) {
    const double fwd = forward();
    if (measured) result.fwd_ms.push_back(fwd);
    if (selection) {
      const double selected = time_ms(cuda, [&] {
        if (ring_selector) {  // as the CP ranks make it
          const AttentionBudgetRequest none;
          const std::function<void(std::vector<double>&)> all_heads;
          ring_selector->select(RingSelectionInputs{q, k, *ring_geometry, none, scale, 0, *ring_context, 0, all_heads});
          ring_context->take_events();
        } else {
          selection();
        }
      });
      if (measured) result.index_ms.push_back(selected);
    }
    if (result.config.backward) {
      const double fwdbwd = forward_backward();
      if (measured) result.fwdbwd_ms.push_back(fwdbwd);
    }
    const auto stats = run_backend().take_layer_stats();
    if (!stats.empty()) result.coverage_mean = stats.front().coverage_mean;
  }

  // The last rows attend the most keys; check as many as the oracle's memory allows.
  void check_against_reference() {
    const AttentionBenchConfig& c = result.config;
    const int64_t length = c.seq_len;
    const int64_t affordable = std::max<int64_t>(1, kReferenceBytes / (32 * c.q_heads * length));
    result.checked_rows = std::min(length, c.check_rows > 0 ? c.check_rows : affordable);
    const int64_t first_row = length - result.checked_rows;
    const at::Tensor reference = pattern().reference_rows(q, k, v, packed, scale, first_row);
    result.max_abs_err =
        (last_out.narrow(0, first_row, result.checked_rows).cpu().to(at::kDouble) - reference).abs().max().item<double>();
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
