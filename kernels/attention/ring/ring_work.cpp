#include "kernels/attention/ring/ring_work.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/attention/core/packed_sequences.h"

namespace sb {

double RingWork::total() const {
  double sum = 0;
  for (const auto& row : pairs) {
    for (double p : row) sum += p;
  }
  return sum;
}

double RingWork::row(int64_t a) const {
  double sum = 0;
  for (double p : pairs.at(static_cast<size_t>(a))) sum += p;
  return sum;
}

namespace {

// A run of consecutive tokens of one block held by one CP rank.
struct OwnerRun {
  int64_t rank = 0;
  double length = 0;
};

}  // namespace

DealtMicrobatch deal_microbatch(const std::vector<int64_t>& lengths, int64_t cp, const CpLayout& layout) {
  DealtMicrobatch out;
  out.packed = PackedSequences::from_lengths(lengths);
  const CpSharding sharding = CpSharding::build(out.packed, cp, layout);
  out.owner.assign(static_cast<size_t>(out.packed.total_tokens()), 0);
  const auto W = static_cast<size_t>(cp);
  out.work.tokens.assign(W, 0);
  out.work.pairs.assign(W, std::vector<double>(W, 0.0));
  for (int64_t r = 0; r < cp; ++r) {
    for (int64_t t : sharding.tokens_of(r)) out.owner[static_cast<size_t>(t)] = static_cast<int32_t>(r);
    out.work.tokens[static_cast<size_t>(r)] = sharding.size_of(r);
  }
  return out;
}

RingWork ring_block_work(const std::vector<int64_t>& lengths, int64_t cp, const CpLayout& layout, int64_t block_size,
                         int64_t query_heads, const RingBlockKeep& keep) {
  if (block_size < 1) throw std::invalid_argument("ring_block_work: block_size must be >= 1");
  DealtMicrobatch dealt = deal_microbatch(lengths, cp, layout);
  const PackedSequences& packed = dealt.packed;
  const std::vector<int32_t>& owner = dealt.owner;
  RingWork& work = dealt.work;
  const auto W = static_cast<size_t>(cp);

  std::vector<double> in_block(W), earlier(W);  // tokens per rank: this block, the sequence's earlier blocks
  std::vector<OwnerRun> runs;
  for (int64_t s = 0; s < packed.num_sequences(); ++s) {
    const int64_t offset = packed.offsets[static_cast<size_t>(s)], length = packed.length(s);
    std::fill(earlier.begin(), earlier.end(), 0.0);
    for (int64_t i = 0, begin = 0; begin < length; ++i, begin += block_size) {
      const int64_t end = std::min(length, begin + block_size);
      ++work.blocks;
      runs.clear();
      std::fill(in_block.begin(), in_block.end(), 0.0);
      for (int64_t t = offset + begin; t < offset + end; ++t) {
        const int64_t r = owner[static_cast<size_t>(t)];
        if (runs.empty() || runs.back().rank != r) runs.push_back({r, 0.0});
        runs.back().length += 1;
        in_block[static_cast<size_t>(r)] += 1;
      }
      // Diagonal: a run's own causal triangle, and every earlier run of the block in full.
      for (size_t x = 0; x < runs.size(); ++x) {
        auto& row = work.pairs[static_cast<size_t>(runs[x].rank)];
        row[static_cast<size_t>(runs[x].rank)] += runs[x].length * (runs[x].length + 1) / 2;
        for (size_t y = 0; y < x; ++y) row[static_cast<size_t>(runs[y].rank)] += runs[x].length * runs[y].length;
      }
      const double kept = i > 0 ? keep(s, i) : 0.0;
      if (i > 0) {
        for (size_t a = 0; a < W; ++a) {
          if (in_block[a] == 0) continue;
          for (size_t b = 0; b < W; ++b) work.pairs[a][b] += in_block[a] * earlier[b] * kept;
        }
      }
      for (size_t r = 0; r < W; ++r) earlier[r] += in_block[r];
    }
  }
  for (auto& row : work.pairs) {
    for (double& p : row) p *= static_cast<double>(query_heads);
  }
  return std::move(work);
}

}  // namespace sb
