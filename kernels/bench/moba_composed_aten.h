#pragma once
// An experiment kept beside the benchmarks, not in the code path: MoBA's CPU attention
// composed of batched ATen ops (gather every row's selected keys into a padded batch,
// bmm, masked softmax, bmm) with the backward left to autograd (index_select's backward
// scatters into k and v). Benchmarked against the custom autograd function
// (moba_attention_cpu), which is the faster of the two and the one in the code path.

#include <ATen/core/Tensor.h>

#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/core/block_layout.h"

namespace sb {

// Training layout only (every block holds queries): q [T, Hq, D], k, v [T, Hkv, D]
// float32 or float64 on the CPU, routing from moba_route_cpu -> out [T, Hq, D].
at::Tensor moba_attention_composed_aten(const at::Tensor& q, const at::Tensor& k,
                                        const at::Tensor& v, const BlockLayout& layout,
                                        const MobaRouting& routing, double scale);

}  // namespace sb
