#pragma once
// Sliding-window attention with sinks (sliding_window_rule.h), on any device, through ATen
// ops autograd differentiates: per sequence, the queries in tiles of kSlidingWindowTile
// rows, each tile against the W + tile - 1 keys its window can reach (a strided view of
// the keys, no copy) and against the S sinks; the window part leaves the sinks out, so the
// two parts are disjoint and one softmax covers them. Work and memory follow the kept
// pairs: about L x (W + tile + S) scores per query head, never [L, L]. A sequence whose
// window covers it (W >= L) runs dense causal attention.
//
// q [T, Hq, D], k, v [T, Hkv, D] packed by `sequences`, Hq % Hkv == 0 (grouped-query
// heads read their key/value head without copies); windows: one per sequence (>= 1).
// Returns [T, Hq, D] in q's dtype, differentiable with respect to q, k, v.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "kernels/attention/core/packed_sequences.h"

namespace sb {

inline constexpr int64_t kSlidingWindowTile = 64;

at::Tensor sliding_window_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const PackedSequences& sequences, const std::vector<int64_t>& windows,
                                    int64_t sinks, double scale);

}  // namespace sb
