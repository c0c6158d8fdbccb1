// Index building for MoBA's varlen attention: one thread block per routing row writes
// the rows of q (query * Hq + head) it gathers and, from its first thread, the row's
// key-block entries (moba_key_blocks.h) in selection order.

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <array>

#include "kernels/attention/patterns/moba/cuda/moba_varlen_index_cuda.h"
#include "kernels/attention/patterns/moba/moba_key_blocks.h"
#include "kernels/attention/core/block_layout.h"

namespace sb {
namespace {

constexpr int kThreads = 128;

struct VarlenIndexParams {
  const int32_t* selected;  // [Hq, NB, capacity]
  const int64_t* table;     // [NB, kBlockFields]
  const int64_t* rows;      // [n]
  const int64_t* cu_q;      // [n + 1]
  const int64_t* cu_k;      // [n + 1]
  int64_t blocks, capacity, q_heads, kv_heads;
  int64_t* q_index;
  int64_t* key_entries;  // [n * capacity, kKeyBlockFields], zeroed by the caller
};

__global__ void moba_varlen_indices_kernel(VarlenIndexParams p) {
  const int64_t i = blockIdx.x;
  const int64_t row = p.rows[i];
  const int64_t h = row / p.blocks, b = row % p.blocks;
  const int64_t g = h / (p.q_heads / p.kv_heads);
  const int64_t* block = p.table + b * kBlockFields;
  for (int64_t r = threadIdx.x; r < block[kBlockQueryLen]; r += blockDim.x) {
    p.q_index[p.cu_q[i] + r] = (block[kBlockQueryStart] + r) * p.q_heads + h;
  }
  if (threadIdx.x != 0) return;
  int64_t offset = p.cu_k[i];
  for (int64_t s = 0; s < p.capacity; ++s) {
    const int64_t j = p.selected[row * p.capacity + s];
    if (j < 0) break;
    if (j == b) continue;
    const int64_t* key_block = p.table + j * kBlockFields;
    int64_t* entry = p.key_entries + (i * p.capacity + s) * kKeyBlockFields;
    entry[kKeyBlockSource] = key_block[kBlockKeyStart];
    entry[kKeyBlockTokens] = key_block[kBlockKeyLen];
    entry[kKeyBlockTarget] = offset;
    entry[kKeyBlockHead] = g;
    offset += key_block[kBlockKeyLen];
  }
}

}  // namespace

void moba_build_varlen_indices_cuda(const at::Tensor& selected, const at::Tensor& table,
                                    const at::Tensor& rows, const at::Tensor& cu_q,
                                    const at::Tensor& cu_k, int64_t q_heads, int64_t kv_heads,
                                    at::Tensor& q_index, at::Tensor& key_entries) {
  TORCH_CHECK(selected.is_cuda() && selected.scalar_type() == at::kInt && selected.dim() == 3 &&
                  selected.is_contiguous(),
              "moba_build_varlen_indices_cuda: selected must be contiguous int32 [Hq, NB, kcap] "
              "on a CUDA device");
  const std::array<const at::Tensor*, 6> index_tensors{&table, &rows, &cu_q, &cu_k, &q_index,
                                                       &key_entries};
  for (const at::Tensor* t : index_tensors) {
    TORCH_CHECK(t->device() == selected.device() && t->scalar_type() == at::kLong &&
                    t->is_contiguous(),
                "moba_build_varlen_indices_cuda: index tensors must be contiguous int64 on ",
                selected.device());
  }
  TORCH_CHECK(rows.size(0) + 1 == cu_q.size(0) && cu_q.size(0) == cu_k.size(0),
              "moba_build_varlen_indices_cuda: cu_q and cu_k need rows + 1 entries");
  TORCH_CHECK(key_entries.dim() == 2 && key_entries.size(0) == rows.size(0) * selected.size(2) &&
                  key_entries.size(1) == kKeyBlockFields,
              "moba_build_varlen_indices_cuda: key_entries must be [rows * kcap, ",
              int64_t{kKeyBlockFields}, "]");
  if (rows.size(0) == 0) return;
  const c10::cuda::CUDAGuard guard(selected.device());
  VarlenIndexParams p{selected.const_data_ptr<int32_t>(),
                      table.const_data_ptr<int64_t>(),
                      rows.const_data_ptr<int64_t>(),
                      cu_q.const_data_ptr<int64_t>(),
                      cu_k.const_data_ptr<int64_t>(),
                      selected.size(1),
                      selected.size(2),
                      q_heads,
                      kv_heads,
                      q_index.mutable_data_ptr<int64_t>(),
                      key_entries.mutable_data_ptr<int64_t>()};
  TORCH_CHECK(rows.size(0) <= 0x7fffffff, "moba_build_varlen_indices_cuda: too many rows");
  moba_varlen_indices_kernel<<<static_cast<unsigned int>(rows.size(0)), kThreads, 0,
                               at::cuda::getCurrentCUDAStream()>>>(p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace sb
