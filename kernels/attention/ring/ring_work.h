#pragma once
// The attention work of one packed micro-batch under context parallelism, per pair of
// CP ranks: how many (query, key) pairs the queries rank a holds compute against the
// keys rank b holds, which is the work of rank a's ring step that visits b's shard
// (docs/simulator.md, "Context parallelism"). A pattern's work model
// (AttentionPattern's simulation hooks) fills it; this file holds what they share.
//
// The tokens are dealt by the real CpSharding (cp_sharding.h), so every layout is the
// trainer's. Pairs are summed over query heads, as the trainer's cp_kept_pairs.

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/attention/core/packed_sequences.h"
#include "kernels/attention/ring/cp_sharding.h"

namespace sb {

struct RingWork {
  std::vector<int64_t> tokens;             // [cp] tokens each CP rank holds
  std::vector<std::vector<double>> pairs;  // [a][b] rank a's queries x rank b's keys
  int64_t blocks = 0;                      // attention blocks of the micro-batch

  double total() const;
  // Rank a's pairs over every shard it visits (its ring compute, in pairs).
  double row(int64_t a) const;
};

// A packed micro-batch dealt to the CP ranks by the trainer's CpSharding: the rank that
// holds each token (packed order), and a RingWork with each rank's tokens and no pairs yet.
struct DealtMicrobatch {
  PackedSequences packed;
  std::vector<int32_t> owner;
  RingWork work;
};
DealtMicrobatch deal_microbatch(const std::vector<int64_t>& lengths, int64_t cp, const CpLayout& layout);

// Work counted by attention block (BlockLayout's blocks: block_size tokens from each
// sequence's start, the last one partial), for patterns that keep whole key blocks:
//   - the diagonal block: the causal pairs (query index >= key index), exactly;
//   - an earlier block of the same sequence, seen from query block i (0-based in its
//     sequence s): every pair of the two blocks, times keep(s, i), the probability that
//     query block i keeps a given one of its i earlier blocks (1: all of them).
// Exact where keep is 0 or 1, expectations otherwise. lengths: the micro-batch's sequences
// in packing order; query_heads: Hq. Work and memory are O(T x cp + blocks x cp^2) for T
// tokens: no per-pair loop. Throws std::invalid_argument for cp < 1 or block_size < 1.
using RingBlockKeep = std::function<double(int64_t sequence, int64_t query_block)>;
RingWork ring_block_work(const std::vector<int64_t>& lengths, int64_t cp, const CpLayout& layout, int64_t block_size,
                         int64_t query_heads, const RingBlockKeep& keep);

}  // namespace sb
