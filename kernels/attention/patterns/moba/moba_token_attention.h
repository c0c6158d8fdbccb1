#pragma once
// MoBA under the token gate (MobaGate::kToken): the routing per query token
// (moba_token_routing.h), then on the CPU the fused kernel (moba_token_attention_cpu.h;
// float16 / bfloat16 widened to float32), on CUDA the two-part varlen attention of its
// plan (moba_token_varlen_plan.h) with flash-attention (float16 / bfloat16, head_dim a
// multiple of 8 up to 256).

#include "kernels/attention/core/block_layout.h"
#include "kernels/attention/patterns/moba/moba_attention.h"

namespace sb {

// Shapes checked by the caller (moba_attention_packed).
MobaResult moba_token_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const BlockLayout& layout, const MobaParams& params);

}  // namespace sb
