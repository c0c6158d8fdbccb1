#pragma once
// What vertical-slash's index under context parallelism is chosen from, the same on every
// CP rank (docs/context_parallel.md, "Vertical-slash under CP"): the first three steps of
// vertical_slash_ring_index.h, shared by the index and by the budget search
// (vertical_slash_ring_budget.h):
//   1. the last n queries of every sequence: each rank fills the rows it holds into a
//      zero tensor, one all-reduce (sum) gives every rank all of them;
//   2. each rank scores them against its own keys; two all-reduces (max, then the sum of
//      exponentials) give every rank each query's softmax denominator;
//   3. each rank adds its keys' share of the column and diagonal sums; one all-reduce
//      (sum) completes them.
// A kept mass summed over the ranks (the coverage) is one more all-reduce: kept_coverage.

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/attention/ring/ring_attention.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"

namespace sb {

// One sequence of the micro-batch as this rank sees it.
struct RingVerticalSlashSequence {
  int64_t length = 0;
  int64_t n = 0;                   // last queries scored: min(last_queries, length)
  std::vector<int64_t> positions;  // this rank's keys of the sequence, ascending positions
  at::Tensor block_columns;  // [Hq, blocks, m] float64 on q's device: the last queries'
                             // attention to this rank's m keys (whole-sequence softmax),
                             // summed per query block (vertical_slash_query_block_columns);
                             // undefined for an empty sequence
  std::vector<std::vector<double>> vertical, slash;  // per query head: the whole sequence's
                                                     // column and diagonal sums [length]
};

// The index's inputs and the time spent waiting in its all-reduces (the rest is compute).
class VerticalSlashRingSums {
 public:
  // q [n, Hq, D], k [n, Hkv, D]: this rank's tokens of the geometry's micro-batch (any
  // float type, CPU or GPU). Every step runs on q's device in float64, heads batched; only
  // the completed column and diagonal sums come to the host (once), where the lists are
  // chosen. Every rank of the group calls it in the same order as its other ring calls.
  VerticalSlashRingSums(const at::Tensor& q, const at::Tensor& k, const RingGeometry& geometry,
                        const VerticalSlashParams& params, double scale, RingContext& context, int64_t call);

  const std::vector<RingVerticalSlashSequence>& sequences() const { return sequences_; }

  // The coverage of each (sequence, query head, lists): the attention mass on the lists'
  // kept entries (summed on q's device, vertical_slash_kept_masses), this rank's keys'
  // share summed over the group by one all-reduce, over n. Every rank must pass the same
  // items (an empty list still takes part).
  struct Item {
    int64_t sequence, head;
    const VerticalSlashHeadIndex* lists;
  };
  std::vector<double> kept_coverage(const std::vector<Item>& items, const char* what);

  // Records the index's event (kRingSelectionStep): all since construction as compute,
  // the all-reduces as wait.
  void record_event() const;

 private:
  void all_reduce(at::Tensor& tensor, c10d::ReduceOp::RedOpType op, const char* what);

  RingContext& context_;
  int64_t call_;
  c10::Device device_;  // q's: where the sums and the all-reduces run
  int64_t block_size_;  // the pattern's query blocks (the block columns')
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::duration waited_{};
  std::vector<RingVerticalSlashSequence> sequences_;
};

}  // namespace sb
