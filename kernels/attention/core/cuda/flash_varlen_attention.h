#pragma once
// LibTorch's flash-attention variable-length ops (at::_flash_attention_forward and
// at::_flash_attention_backward with cumulative sequence lengths) behind
// VarlenAttentionOps: float16 / bfloat16 on sm80+, head_dim a multiple of 8 up to 256;
// lse is [H, total_q] float32; causal masks align to the bottom-right of each segment.

#include "kernels/attention/core/varlen_attention_ops.h"

namespace sb {

const VarlenAttentionOps& flash_varlen_attention();

}  // namespace sb
