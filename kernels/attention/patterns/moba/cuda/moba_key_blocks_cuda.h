#pragma once
// CUDA twins of gather_key_blocks and add_key_block_grads (moba_key_blocks.h); the
// checks on shapes and dtypes are done by those callers.

#include <ATen/core/Tensor.h>

#include "kernels/attention/patterns/moba/moba_key_blocks.h"

namespace sb {

// x [Tk, Hkv, D] contiguous on a CUDA device; out [gathered_rows, 1, D] preallocated.
void gather_key_blocks_cuda(const at::Tensor& x, const MobaKeyBlocks& blocks, at::Tensor& out);

// into [Tk, Hkv, D] contiguous (float or double), gathered_grad [gathered_rows, 1, D].
void add_key_block_grads_cuda(at::Tensor& into, const at::Tensor& gathered_grad,
                              const MobaKeyBlocks& blocks, const MobaKeyBlockRuns& runs);

}  // namespace sb
