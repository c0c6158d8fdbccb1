#pragma once
// Sliding-window attention with sinks (sliding_window_rule.h), on any device, through ATen
// ops autograd differentiates: per sequence, the queries in tiles of kSlidingWindowTile
// rows, each tile one call of scaled_dot_product_attention against the keys its windows
// reach (W + tile - 1 of them, a view) and the sinks before them, masked by the rule.
// Work and memory follow the kept pairs: about L x (W + tile + S) scores per query head,
// never [L, L]. A sequence whose window covers it (W >= L) runs dense causal attention.
//
// q [T, Hq, D], k, v [T, Hkv, D] packed by `sequences`, Hq % Hkv == 0 (grouped-query
// heads through SDPA's enable_gqa); windows: one per sequence (>= 1).
// Returns [T, Hq, D] in q's dtype, differentiable with respect to q, k, v.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "kernels/attention/core/packed_sequences.h"

namespace sb {

// 128 rows: side by side on the CPU, 3x faster than 64-row tiles of hand-written
// einsums at W 256 (docs/sliding_window.md).
inline constexpr int64_t kSlidingWindowTile = 128;

at::Tensor sliding_window_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const PackedSequences& sequences, const std::vector<int64_t>& windows,
                                    int64_t sinks, double scale);

}  // namespace sb
