#pragma once
// Dense causal attention over packed sequences: every query attends to all earlier keys
// (and itself) of its own sequence, on at::scaled_dot_product_attention per sequence.
// The dense pattern's backend (patterns/dense/) and every pattern that falls back to
// dense work (a decoding step over a cache, a sequence its pattern keeps whole) call it.
//
// Shapes: q [T, Hq, D]; k, v [T, Hkv, D] with Hq % Hkv == 0 (query head h reads
// key/value head h / (Hq / Hkv)). Differentiable through autograd.

#include <ATen/core/Tensor.h>

#include "kernels/attention/core/packed_sequences.h"

namespace sb {

// q, k and v cover the same packed tokens. Returns [T, Hq, D] in q's dtype.
at::Tensor dense_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const PackedSequences& sequences, double scale);

// Decoding with a cache: the n new queries q [n, Hq, D] sit at positions [L - n, L) of
// the L cached keys k, v [L, Hkv, D] (n <= L) and attend causally. Returns [n, Hq, D].
at::Tensor dense_causal_attention_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                         double scale);

// The float64 reference of one sequence's rows [first_row, L): q [L, Hq, D], k, v
// [L, Hkv, D] on any device, the scores written out with their causal mask ([Hq, rows, L]
// doubles). Returns [L - first_row, Hq, D] float64 on the CPU.
at::Tensor dense_causal_reference_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                                       int64_t first_row);

}  // namespace sb
