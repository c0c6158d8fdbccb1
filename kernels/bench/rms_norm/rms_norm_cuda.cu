// Fused RMSNorm forward, one thread block per row, in four layers: device functions
// (block reduction, one row), kernel, launcher on a stream, checked entry point.

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/bench/rms_norm/rms_norm.h"

namespace sb {
namespace {

constexpr int kWarpSize = 32;
constexpr int kMaxThreads = 1024;

template <typename T>
struct RmsNormParams {
  const T* x;       // [rows, hidden]
  const T* weight;  // [hidden]
  T* y;             // [rows, hidden]
  int64_t rows;
  int64_t hidden;
  float eps;
};

// ---- device functions ----------------------------------------------------------

__device__ __forceinline__ float warp_reduce_sum(float value) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

// Sum over the whole block, returned to every thread. blockDim.x is a multiple of 32,
// so every warp is full and the shuffle mask above is exact.
__device__ float block_reduce_sum(float value) {
  __shared__ float warp_sums[kMaxThreads / kWarpSize];
  __shared__ float total;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int num_warps = blockDim.x / kWarpSize;

  value = warp_reduce_sum(value);
  if (lane == 0) warp_sums[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < num_warps ? warp_sums[lane] : 0.0f;
    value = warp_reduce_sum(value);
    if (lane == 0) total = value;
  }
  __syncthreads();
  return total;
}

// Qwen2's rounding: the normalized value is computed in float32 and rounded to T,
// then multiplied by the weight with the product rounded to T (as torch's T * T).
template <typename T>
__device__ void rms_norm_row(const T* x_row, const T* weight, T* y_row, int64_t hidden, float eps) {
  float sum_squares = 0.0f;
  for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
    const float value = static_cast<float>(x_row[j]);
    sum_squares += value * value;
  }
  const float total = block_reduce_sum(sum_squares);
  const float inv_rms = rsqrtf(total / static_cast<float>(hidden) + eps);
  for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
    const T normalized = static_cast<T>(static_cast<float>(x_row[j]) * inv_rms);
    y_row[j] = static_cast<T>(static_cast<float>(weight[j]) * static_cast<float>(normalized));
  }
}

// ---- kernel --------------------------------------------------------------------

template <typename T>
__global__ void rms_norm_forward_kernel(RmsNormParams<T> params) {
  const int64_t row = blockIdx.x;
  const int64_t base = row * params.hidden;
  rms_norm_row<T>(params.x + base, params.weight, params.y + base, params.hidden, params.eps);
}

// ---- launcher ------------------------------------------------------------------

template <typename T>
void rms_norm_forward_launch(const RmsNormParams<T>& params, cudaStream_t stream) {
  if (params.rows == 0) return;
  // One thread per element up to 1024, rounded up to full warps; wider rows loop.
  const int64_t warps = (params.hidden + kWarpSize - 1) / kWarpSize;
  const int threads = static_cast<int>(std::min<int64_t>(warps * kWarpSize, kMaxThreads));
  rms_norm_forward_kernel<T>
      <<<static_cast<unsigned int>(params.rows), threads, 0, stream>>>(params);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T>
void rms_norm_forward_typed(const at::Tensor& x, const at::Tensor& weight, at::Tensor& y,
                            double eps) {
  RmsNormParams<T> params{x.const_data_ptr<T>(),
                          weight.const_data_ptr<T>(),
                          y.mutable_data_ptr<T>(),
                          x.size(0),
                          x.size(1),
                          static_cast<float>(eps)};
  rms_norm_forward_launch<T>(params, at::cuda::getCurrentCUDAStream());
}

}  // namespace

// ---- entry point ---------------------------------------------------------------

at::Tensor rms_norm_forward_cuda(const at::Tensor& x, const at::Tensor& weight, double eps) {
  TORCH_CHECK(x.is_cuda(), "rms_norm_forward_cuda: x must be on a CUDA device, got ", x.device());
  TORCH_CHECK(weight.device() == x.device(), "rms_norm_forward_cuda: weight is on ",
              weight.device(), " but x is on ", x.device());
  TORCH_CHECK(x.dim() == 2, "rms_norm_forward_cuda: x must be [N, H], got ", x.sizes());
  TORCH_CHECK(x.size(1) > 0, "rms_norm_forward_cuda: hidden size must be positive");
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == x.size(1),
              "rms_norm_forward_cuda: weight must be [H] with H = ", x.size(1), ", got ",
              weight.sizes());
  TORCH_CHECK(weight.scalar_type() == x.scalar_type(), "rms_norm_forward_cuda: weight dtype ",
              weight.scalar_type(), " differs from x dtype ", x.scalar_type());
  TORCH_CHECK(x.is_contiguous() && weight.is_contiguous(),
              "rms_norm_forward_cuda: x and weight must be contiguous (call .contiguous())");
  TORCH_CHECK(x.size(0) <= 0x7fffffff, "rms_norm_forward_cuda: ", x.size(0),
              " rows exceed the grid limit of 2^31 - 1");
  TORCH_CHECK(std::isfinite(eps) && eps >= 0.0, "rms_norm_forward_cuda: eps must be >= 0, got ",
              eps);

  const c10::cuda::CUDAGuard device_guard(x.device());
  at::Tensor y = at::empty_like(x);  // [N, H]
  switch (x.scalar_type()) {
    case at::kFloat:
      rms_norm_forward_typed<float>(x, weight, y, eps);
      break;
    case at::kHalf:
      rms_norm_forward_typed<at::Half>(x, weight, y, eps);
      break;
    case at::kBFloat16:
      rms_norm_forward_typed<at::BFloat16>(x, weight, y, eps);
      break;
    default:
      TORCH_CHECK(false, "rms_norm_forward_cuda: unsupported dtype ", x.scalar_type(),
                  " (supported: float32, float16, bfloat16)");
  }
  return y;
}

}  // namespace sb
