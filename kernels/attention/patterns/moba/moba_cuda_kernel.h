#pragma once
// Which CUDA implementation runs MoBA's attention (docs/block_sparse_attention.md): the
// fused block-sparse kernels (bf16 / fp16, head_dim 64 or 128), or the earlier path of
// gathered key blocks through flash-attention varlen (any head_dim up to 256). kAuto:
// fused where it applies, else flash-varlen. The CPU implementation ignores the choice.

#include "common/option_names.h"

namespace sb {

enum class MobaCudaKernel { kAuto, kFused, kFlashVarlen };
const OptionNames<MobaCudaKernel>& moba_cuda_kernel_options();  // "auto" | "fused" | "flash_varlen"

}  // namespace sb
