#pragma once
// MoBA's (query, key) pairs on given inputs, summed over query heads: the work `bench
// attention` and the Google benchmarks divide time by (attention_benchmark.h, "Formulas";
// docs/benchmarks.md).

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/core/packed_sequences.h"

namespace sb {

// MoBA's pairs on q [T, Hq, D], k [T, Hkv, D] (q and k the same tokens, `packed`): the
// routing `params` gives (run here), a listed diagonal block counting its causal
// triangle (per query under the token gate: the keys up to it), every other listed
// block whole.
double moba_attended_pairs(const at::Tensor& q, const at::Tensor& k, const PackedSequences& packed,
                           const MobaParams& params);

}  // namespace sb
