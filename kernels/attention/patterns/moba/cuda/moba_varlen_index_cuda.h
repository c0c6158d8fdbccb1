#pragma once
// CUDA twin of the host loop in moba_build_varlen_indices (moba_varlen_attention.cpp):
// the query rows and key blocks each routing row of a chunk gathers.

#include <ATen/core/Tensor.h>

namespace sb {

// selected [Hq, NB, kcap] int32, table [NB, kBlockFields] int64, rows, cu_q, cu_k
// int64 (cu_* of size rows + 1), all on one CUDA device; writes q_index [cu_q.back()]
// and key_entries [rows * kcap, kKeyBlockFields] (int64, preallocated, key_entries zeroed).
void moba_build_varlen_indices_cuda(const at::Tensor& selected, const at::Tensor& table,
                                    const at::Tensor& rows, const at::Tensor& cu_q,
                                    const at::Tensor& cu_k, int64_t q_heads, int64_t kv_heads,
                                    at::Tensor& q_index, at::Tensor& key_entries);

}  // namespace sb
