#pragma once
// Which kernel at::scaled_dot_product_attention runs, and a scope that pins it to
// flash-attention. Dense attention (dense_causal_attention.h) calls SDPA and lets it
// choose; on an H100 with LibTorch 2.11 it chooses cuDNN's attention, not
// flash-attention, for bf16 causal GQA at head_dim 64 (docs/benchmarks.md). Benchmarks
// name the kernel they timed and can time flash-attention itself beside it.

#include <ATen/core/Tensor.h>

#include <string>

namespace sb {

// The kernel SDPA picks for the dense backend's call on q [L, Hq, D], k, v [L, Hkv, D]
// (causal, grouped query heads): "flash", "cudnn", "mem-efficient", "math" (or
// "backend N" for one this build does not name).
std::string dense_sdpa_kernel(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale);

// While it lives, SDPA may use flash-attention only (math off too, so a shape flash
// refuses fails instead of falling back to another kernel); the process-wide choice is
// restored after. Not thread-safe: the flags are global.
class SdpaFlashOnlyScope {
 public:
  explicit SdpaFlashOnlyScope(bool active);
  ~SdpaFlashOnlyScope();
  SdpaFlashOnlyScope(const SdpaFlashOnlyScope&) = delete;
  SdpaFlashOnlyScope& operator=(const SdpaFlashOnlyScope&) = delete;

 private:
  bool active_, flash_, efficient_, cudnn_, math_;
};

}  // namespace sb
