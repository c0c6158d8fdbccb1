#pragma once
// Numerical precision of the Qwen2 model's compute.
//
//   fp32        everything in float32 (parameters, activations, gradients).
//   bf16-mixed  parameters, gradients and optimizer state stay float32 ("master"
//               weights); the forward runs under LibTorch's autocast with bfloat16,
//               which casts the inputs of matmul-like ops (linear, SDPA) to bfloat16
//               and keeps reductions and the residual stream in float32. Autograd
//               carries the casts, so gradients arrive in float32 on the float32
//               parameters. Works on CUDA (the intended use) and on CPU (autocast's
//               CPU path; slower than fp32 on most CPUs, useful to test the path).
//
// Autocast was chosen over bf16 working copies of the weights: no second copy to keep
// in sync after every optimizer step, the weight casts are cached within one forward,
// and the loss and softmax statistics stay in float32 without special cases.

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <string>
#include <vector>

namespace sb {

enum class Qwen2Precision { kFloat32, kBFloat16Mixed };

// "fp32" | "bf16-mixed"; anything else throws std::invalid_argument listing the names.
Qwen2Precision qwen2_precision_from_name(const std::string& name);
std::string qwen2_precision_name(Qwen2Precision precision);
std::vector<std::string> qwen2_precision_names();

// The autocast settings of the current thread for CPU and CUDA, captured so that a
// recomputation (activation checkpointing) runs under the same ones as the forward.
struct Qwen2AutocastState {
  bool cpu_enabled = false;
  c10::ScalarType cpu_dtype = c10::ScalarType::BFloat16;
  bool cuda_enabled = false;
  c10::ScalarType cuda_dtype = c10::ScalarType::BFloat16;

  static Qwen2AutocastState current();
};

// RAII: enters autocast as the precision asks for on `device_type` (fp32: leaves the
// thread's settings alone) and restores the previous settings on exit; the weight-cast
// cache is cleared when the outermost autocast region ends, as torch.autocast does.
class Qwen2AutocastGuard {
 public:
  Qwen2AutocastGuard(c10::DeviceType device_type, Qwen2Precision precision);
  // Re-enters exactly `state` (for a recomputation), with the weight-cast cache off:
  // the cache would otherwise hand out casts made under no-grad, cutting the gradient
  // path to the weights.
  explicit Qwen2AutocastGuard(const Qwen2AutocastState& state);
  ~Qwen2AutocastGuard();
  Qwen2AutocastGuard(const Qwen2AutocastGuard&) = delete;
  Qwen2AutocastGuard& operator=(const Qwen2AutocastGuard&) = delete;

 private:
  void apply(const Qwen2AutocastState& state, bool cache_enabled);

  bool active_ = false;
  Qwen2AutocastState previous_;
  bool previous_cache_enabled_ = true;
};

// RAII: turns the autocast weight-cast cache off (a no-grad forward that will be
// recomputed must not leave casts without autograd history in the cache).
class Qwen2AutocastCacheOff {
 public:
  Qwen2AutocastCacheOff();
  ~Qwen2AutocastCacheOff();
  Qwen2AutocastCacheOff(const Qwen2AutocastCacheOff&) = delete;
  Qwen2AutocastCacheOff& operator=(const Qwen2AutocastCacheOff&) = delete;

 private:
  bool previous_;
};

}  // namespace sb
