#pragma once
// The attention work of one packed micro-batch under context parallelism, per pair of
// CP ranks: how many (query, key) pairs the queries rank a holds compute against the
// keys rank b holds, which is the work of rank a's ring step that visits b's shard
// (docs/simulator.md, "Context parallelism").
//
// The tokens are dealt by the real CpSharding (kernels/attention/ring/cp_sharding.h), so
// every layout is the trainer's. Pairs are counted by attention block (MobaLayout's
// blocks: block_size tokens from each sequence's start, the last one partial):
//   - the diagonal block: the causal pairs (query index >= key index), exactly;
//   - an earlier block j of the same sequence, seen from query block i: every pair of
//     the two blocks, times the probability that i keeps j:
//       dense (budget 0)   1
//       MoBA (budget k)    1 when the sequence has at most k blocks up to i (all kept),
//                          else (k - 1) / i: the diagonal takes one of the k slots and
//                          [our rule] the k - 1 others fall on the i earlier blocks with
//                          equal probability (the simulator has no gate scores).
// Dense counts are exact (the real kernel's kept pairs); MoBA's are expectations. Pairs
// are summed over query heads, as the trainer's cp_kept_pairs. Work and memory are
// O(T x cp + blocks x cp^2) for T tokens: no per-pair loop.

#include <cstdint>
#include <vector>

#include "kernels/attention/packed_sequences.h"
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

// lengths: the micro-batch's sequences in packing order; budgets: one per sequence,
// 0 for dense causal attention, k >= 1 for MoBA; block_size: MoBA's block (any value
// >= 1 for dense: the count does not depend on it); query_heads: Hq.
// Throws std::invalid_argument on mismatched sizes, cp < 1 or block_size < 1.
RingWork ring_work(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets, int64_t cp,
                   const CpLayout& layout, int64_t block_size, int64_t query_heads);

}  // namespace sb
