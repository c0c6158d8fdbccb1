#pragma once
// MoBA on CUDA devices (built with SB_CUDA=ON): the gate, top-k and index building run
// as CUDA kernels; the attention runs LibTorch's flash-attention variable-length ops on
// the diagonal blocks and on the gathered selected blocks, merged by log-sum-exp.

#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/core/block_layout.h"

namespace sb {

// q [Tq, Hq, D], k, v [Tk, Hkv, D] on one CUDA device, float16 or bfloat16 (what
// flash-attention runs), head_dim a multiple of 8 up to 256. Checked by the caller
// (moba_attention_packed) for shapes; dtype and head_dim are checked here.
MobaResult moba_attention_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const BlockLayout& layout, const MobaParams& params);

}  // namespace sb
