#include "kernels/attention/ring/cp_sharding.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>

namespace sb {

const OptionNames<CpLayoutKind>& cp_layout_options() {
  static const OptionNames<CpLayoutKind> names{
      "context-parallel layout",
      {{"contiguous", CpLayoutKind::kContiguous}, {"zigzag", CpLayoutKind::kZigzag}, {"striped", CpLayoutKind::kStriped}}};
  return names;
}

namespace {

// Appends positions [begin, end) of the sequence starting at `offset` to `tokens`.
void take(std::vector<int64_t>& tokens, int64_t offset, int64_t begin, int64_t end) {
  for (int64_t p = begin; p < end; ++p) tokens.push_back(offset + p);
}

// Start of chunk c of `chunks` near-equal chunks of a length-L sequence.
int64_t chunk_start(int64_t length, int64_t chunks, int64_t c) { return c * length / chunks; }

}  // namespace

CpSharding CpSharding::build(const PackedSequences& sequences, int64_t cp, const CpLayout& layout) {
  if (cp < 1) throw std::invalid_argument("context parallelism: cp must be >= 1, got " + std::to_string(cp));
  if (layout.kind == CpLayoutKind::kStriped && layout.stripe_tokens < 1) {
    throw std::invalid_argument("context parallelism: the striped layout needs stripe_tokens >= 1, got " +
                                std::to_string(layout.stripe_tokens));
  }
  CpSharding sharding;
  sharding.sequences_ = sequences;
  sharding.layout_ = layout;
  sharding.tokens_.assign(cp, {});
  int64_t stripe = 0;  // striped: the running stripe number over the micro-batch
  for (int64_t s = 0; s < sequences.num_sequences(); ++s) {
    const int64_t offset = sequences.offsets[s], length = sequences.length(s);
    for (int64_t r = 0; r < cp; ++r) {
      std::vector<int64_t>& tokens = sharding.tokens_[r];
      switch (layout.kind) {
        case CpLayoutKind::kContiguous:
          take(tokens, offset, chunk_start(length, cp, r), chunk_start(length, cp, r + 1));
          break;
        case CpLayoutKind::kZigzag:
          take(tokens, offset, chunk_start(length, 2 * cp, r), chunk_start(length, 2 * cp, r + 1));
          take(tokens, offset, chunk_start(length, 2 * cp, 2 * cp - 1 - r), chunk_start(length, 2 * cp, 2 * cp - r));
          break;
        case CpLayoutKind::kStriped:
          break;  // below, in stripe order
      }
    }
    if (layout.kind == CpLayoutKind::kStriped) {
      for (int64_t begin = 0; begin < length; begin += layout.stripe_tokens, ++stripe) {
        take(sharding.tokens_[stripe % cp], offset, begin, std::min(length, begin + layout.stripe_tokens));
      }
    }
  }
  return sharding;
}

std::vector<int64_t> CpSharding::positions_of(int64_t rank) const {
  std::vector<int64_t> positions;
  positions.reserve(tokens_of(rank).size());
  int64_t s = 0;
  for (int64_t t : tokens_of(rank)) {
    while (sequences_.offsets[s + 1] <= t) ++s;  // tokens ascend, so s only moves forward
    positions.push_back(t - sequences_.offsets[s]);
  }
  return positions;
}

at::Tensor CpSharding::shard(const at::Tensor& whole, int64_t rank) const {
  TORCH_CHECK(whole.size(0) == sequences_.total_tokens(), "CpSharding::shard: ", whole.size(0),
              " rows for a micro-batch of ", sequences_.total_tokens(), " tokens");
  const std::vector<int64_t>& tokens = tokens_of(rank);
  const at::Tensor index = at::tensor(tokens, at::kLong).to(whole.device());
  return whole.index_select(0, index);
}

at::Tensor CpSharding::unshard(const std::vector<at::Tensor>& parts) const {
  TORCH_CHECK(static_cast<int64_t>(parts.size()) == cp(), "CpSharding::unshard: ", parts.size(),
              " parts for cp ", cp());
  std::vector<int64_t> all;
  for (int64_t r = 0; r < cp(); ++r) {
    TORCH_CHECK(parts[r].size(0) == size_of(r), "CpSharding::unshard: part ", r, " has ", parts[r].size(0),
                " rows, rank ", r, " holds ", size_of(r), " tokens");
    all.insert(all.end(), tokens_[r].begin(), tokens_[r].end());
  }
  const at::Tensor stacked = at::cat(parts, 0);
  at::Tensor whole = at::empty_like(stacked);
  whole.index_copy_(0, at::tensor(all, at::kLong).to(stacked.device()), stacked);
  return whole;
}

}  // namespace sb
