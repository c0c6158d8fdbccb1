#pragma once
// The MoBA gate on a CUDA device: block means, gate scores, top-k by the tie rule,
// coverage and the DST floor, with the same float64 arithmetic and the same outputs as
// moba_route_cpu (only summation orders differ).

#include <ATen/core/Tensor.h>

#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/core/block_layout.h"

namespace sb {

// q [Tq, Hq, D], k [Tk, Hkv, D] on one CUDA device (any floating dtype). A sequence
// may have as many blocks as the sort fits in shared memory: 12 bytes per block
// rounded up to a power of two (about 16K blocks on an H100).
MobaRouting moba_route_cuda(const at::Tensor& q, const at::Tensor& k, const BlockLayout& layout,
                            const MobaParams& params);

}  // namespace sb
