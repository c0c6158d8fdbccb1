#pragma once
// How a packed micro-batch's tokens are dealt to the ranks of a context-parallel (CP)
// group, and back. The rules (docs/context_parallel.md, "Layouts"):
// - contiguous: each sequence is cut into W near-equal chunks, chunk r to rank r
//   (chunk r = positions [floor(r L / W), floor((r + 1) L / W)) of a length-L sequence);
// - zigzag: each sequence is cut into 2W near-equal chunks, rank r holds chunks r and
//   2W - 1 - r (an early and a late chunk, so causal work evens out);
// - striped: every sequence is cut into stripes of `stripe_tokens` from its first token
//   (the last may be partial); the stripes of the whole micro-batch are numbered in
//   order and stripe n goes to rank n mod W (MTraining's round-robin dealing; the count
//   runs on across sequences so short sequences do not all start on rank 0).
// A rank keeps its tokens in ascending global order; a token keeps its sequence and its
// position in the sequence (rotary positions are the global ones).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/option_names.h"
#include "kernels/attention/core/packed_sequences.h"

namespace sb {

enum class CpLayoutKind { kContiguous, kZigzag, kStriped };
const OptionNames<CpLayoutKind>& cp_layout_options();  // "contiguous" | "zigzag" | "striped"

struct CpLayout {
  CpLayoutKind kind = CpLayoutKind::kStriped;
  int64_t stripe_tokens = 128;  // striped only (MTraining: 128)

  std::string name() const { return cp_layout_options().name_of(kind); }
};

// The fewest tokens per stripe the GPU ring takes (docs/context_parallel.md, "On GPUs"):
// each stripe is a tile of the fused kernels (64 rows), and a step's tables grow with the
// square of the stripes a rank holds.
inline constexpr int64_t kGpuRingMinStripeTokens = 64;

class CpSharding {
 public:
  // Throws std::invalid_argument for cp < 1 or stripe_tokens < 1.
  static CpSharding build(const PackedSequences& sequences, int64_t cp, const CpLayout& layout);

  int64_t cp() const { return static_cast<int64_t>(tokens_.size()); }
  const PackedSequences& sequences() const { return sequences_; }
  const CpLayout& layout() const { return layout_; }
  // Global token indices (into the packed micro-batch) held by `rank`, ascending.
  const std::vector<int64_t>& tokens_of(int64_t rank) const { return tokens_.at(rank); }
  int64_t size_of(int64_t rank) const { return static_cast<int64_t>(tokens_.at(rank).size()); }
  // Position inside its sequence of each token `rank` holds (the rotary position).
  std::vector<int64_t> positions_of(int64_t rank) const;

  // Rows of `whole` [T, ...] that `rank` holds: [size_of(rank), ...].
  at::Tensor shard(const at::Tensor& whole, int64_t rank) const;
  // The inverse: parts[r] [size_of(r), ...] put back into one [T, ...] tensor.
  at::Tensor unshard(const std::vector<at::Tensor>& parts) const;

 private:
  PackedSequences sequences_;
  CpLayout layout_;
  std::vector<std::vector<int64_t>> tokens_;
};

}  // namespace sb
