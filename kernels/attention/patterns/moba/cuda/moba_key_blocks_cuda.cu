// Copying MoBA's selected key blocks into the gathered rows and summing their gradients
// back (moba_key_blocks.h), one thread block per entry or per (source run, tile).
//   gather: a key row is D contiguous values; it is copied in the widest words (16, 8,
//     4 or 1 bytes) that divide the row and the two base addresses.
//   add: each thread sums one element over the run's entries in order, in the
//     accumulation type, then adds the sum to its element of `into` (no atomics: runs
//     have distinct sources and threads distinct elements).

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstdint>

#include "kernels/attention/patterns/moba/cuda/moba_key_blocks_cuda.h"

namespace sb {
namespace {

constexpr int kThreads = 256;

// One thread block per entry; words per key row = row_words.
template <typename word_t>
__global__ void gather_key_blocks_kernel(const word_t* __restrict__ x, word_t* __restrict__ out,
                                         const int64_t* __restrict__ entries, int64_t kv_heads,
                                         int64_t row_words) {
  const MobaKeyBlockEntry e = read_key_block_entry(entries, blockIdx.x);
  const int64_t words = e.tokens * row_words;
  for (int64_t w = threadIdx.x; w < words; w += blockDim.x) {
    const int64_t t = w / row_words, c = w % row_words;
    out[(e.target + t) * row_words + c] = x[((e.source + t) * kv_heads + e.head) * row_words + c];
  }
}

template <typename word_t>
void launch_gather(const at::Tensor& x, at::Tensor& out, const at::Tensor& entries,
                   int64_t row_bytes) {
  const int64_t row_words = row_bytes / static_cast<int64_t>(sizeof(word_t));
  gather_key_blocks_kernel<word_t><<<static_cast<unsigned int>(entries.size(0)), kThreads, 0,
                                     at::cuda::getCurrentCUDAStream()>>>(
      static_cast<const word_t*>(x.const_data_ptr()), static_cast<word_t*>(out.mutable_data_ptr()),
      entries.const_data_ptr<int64_t>(), x.size(1), row_words);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// grid (runs, tiles): thread block (r, tile) owns elements [tile * kThreads, ...) of the
// run's block (tokens x D values), one per thread. The run's gathered rows are staged in
// shared memory kThreads at a time, so the inner loop issues only the gradient loads
// (independent of the running sum: the unrolled loop keeps several in flight while the
// additions stay in order).
template <typename scalar_t, typename acc_t>
__global__ void add_key_block_grads_kernel(acc_t* __restrict__ into,
                                           const scalar_t* __restrict__ grad,
                                           const int64_t* __restrict__ entries,
                                           const int64_t* __restrict__ order,
                                           const int64_t* __restrict__ runs, int64_t kv_heads,
                                           int64_t dim) {
  __shared__ int64_t row_offset[kThreads];  // first value of each staged gathered block in grad
  const int64_t begin = runs[blockIdx.x], end = runs[blockIdx.x + 1];
  const MobaKeyBlockEntry first = read_key_block_entry(entries, order[begin]);
  const int64_t elements = first.tokens * dim;
  if (static_cast<int64_t>(blockIdx.y) * kThreads >= elements) return;  // whole thread block
  const int64_t i = static_cast<int64_t>(blockIdx.y) * kThreads + threadIdx.x;
  acc_t sum = 0;
  for (int64_t base = begin; base < end; base += kThreads) {
    const int n = static_cast<int>(min(static_cast<int64_t>(kThreads), end - base));
    __syncthreads();  // the previous batch is read
    if (threadIdx.x < n) {
      row_offset[threadIdx.x] = entries[order[base + threadIdx.x] * kKeyBlockFields + kKeyBlockTarget] * dim;
    }
    __syncthreads();
    if (i < elements) {
#pragma unroll 8
      for (int s = 0; s < n; ++s) sum += static_cast<acc_t>(grad[row_offset[s] + i]);
    }
  }
  if (i < elements) {
    const int64_t t = i / dim, d = i % dim;
    into[((first.source + t) * kv_heads + first.head) * dim + d] += sum;
  }
}

}  // namespace

void gather_key_blocks_cuda(const at::Tensor& x, const MobaKeyBlocks& blocks, at::Tensor& out) {
  const int64_t entries = blocks.entries.size(0);
  if (entries == 0 || out.numel() == 0) return;
  TORCH_CHECK(entries <= 0x7fffffff, "gather_key_blocks_cuda: too many entries");
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t row_bytes = x.size(2) * static_cast<int64_t>(x.element_size());
  const auto divides = [&](int64_t word) {
    return row_bytes % word == 0 && reinterpret_cast<std::uintptr_t>(x.const_data_ptr()) % word == 0 &&
           reinterpret_cast<std::uintptr_t>(out.const_data_ptr()) % word == 0;
  };
  if (divides(16)) {
    launch_gather<uint4>(x, out, blocks.entries, row_bytes);
  } else if (divides(8)) {
    launch_gather<uint2>(x, out, blocks.entries, row_bytes);
  } else if (divides(4)) {
    launch_gather<uint32_t>(x, out, blocks.entries, row_bytes);
  } else {
    launch_gather<uint8_t>(x, out, blocks.entries, row_bytes);
  }
}

void add_key_block_grads_cuda(at::Tensor& into, const at::Tensor& gathered_grad,
                              const MobaKeyBlocks& blocks, const MobaKeyBlockRuns& runs) {
  const int64_t sources = runs.runs.numel() - 1;
  if (sources <= 0) return;
  TORCH_CHECK(sources <= 0x7fffffff, "add_key_block_grads_cuda: too many source blocks");
  const c10::cuda::CUDAGuard guard(into.device());
  const int64_t dim = into.size(2);
  const int64_t tiles = (blocks.max_tokens * dim + kThreads - 1) / kThreads;
  TORCH_CHECK(tiles <= 65535, "add_key_block_grads_cuda: blocks of ", blocks.max_tokens,
              " keys x head_dim ", dim, " exceed the grid's 65535 tiles of ", kThreads);
  const dim3 grid(static_cast<unsigned int>(sources), static_cast<unsigned int>(tiles));
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, gathered_grad.scalar_type(), "add_key_block_grads_cuda", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        add_key_block_grads_kernel<scalar_t, acc_t>
            <<<grid, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
                into.mutable_data_ptr<acc_t>(), gathered_grad.const_data_ptr<scalar_t>(),
                blocks.entries.const_data_ptr<int64_t>(), runs.order.const_data_ptr<int64_t>(),
                runs.runs.const_data_ptr<int64_t>(), into.size(1), dim);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
}

}  // namespace sb
