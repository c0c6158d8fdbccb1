#pragma once
// MoBA's own routing, per query token (MobaGate::kToken; docs/sparsebalance.md 1.1): the
// query at position p of a sequence, in block b = p / block_size, scores every key block
// j of its sequence by q_p[h] . mean(K_j[g(h)]) in float64; it keeps block b (causal
// inside) and the top-(k - 1) blocks j < b (any j != b when not causal), ties to the
// lower index. Coverage, the DST floor and the coverage curve read the same rows
// (head, query token) the way the block gate reads (head, query block).
//
// Written with ATen ops on the inputs' device (CPU or CUDA alike: the same float64 scores
// and one ranking rule), one sequence at a time, its queries in chunks whose [Hq, chunk,
// blocks] scores stay within a few tens of MB; each row's best blocks are ranked by a
// partial sort on the CPU, a stable sort elsewhere. Waits for the device twice: the
// floor's curve (when asked for) and the coverage per sequence.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/attention/core/block_layout.h"
#include "kernels/attention/patterns/moba/moba_attention.h"

namespace sb {

// q [Tq, Hq, D], k [Tk, Hkv, D] on one device. The routing's selected [Hq, Tq, kcap] and
// selected_count [Hq, Tq] are on that device.
MobaRouting moba_route_tokens(const at::Tensor& q, const at::Tensor& k, const BlockLayout& layout,
                              const MobaParams& params);

// A run of queries at consecutive positions of one sequence, in consecutive rows of q.
struct MobaQueryRun {
  int64_t sequence = 0;
  int64_t row = 0;       // first row in q
  int64_t position = 0;  // its position in the sequence (keys' numbering)
  int64_t count = 0;
};

// The same rule for a share of the layout's queries (a CP rank's, docs/context_parallel.md):
// q [Tq, Hq, D] holds the runs' queries; key_means [NB, Hkv, D] float64 on q's device is
// every key block's mean over the whole micro-batch. sum_over_query_shards adds a host
// vector over the ranks holding the call's other queries, so that every rank's DST floor,
// coverage curve and coverage are the call's (null: q holds them all). The selection rows
// are q's rows.
MobaRouting moba_route_token_runs(const at::Tensor& q, const at::Tensor& key_means,
                                  const std::vector<MobaQueryRun>& runs, const BlockLayout& layout,
                                  const MobaParams& params,
                                  const std::function<void(std::vector<double>&)>& sum_over_query_shards);

// [..., columns] int64: each row of scores [..., nb] (float64)'s `columns` best blocks,
// higher score first, equal scores by the lower index. On the CPU a partial sort per row
// (a full sort of every row took 4x as long); elsewhere moba_best_blocks_by_sort.
at::Tensor moba_best_blocks(const at::Tensor& scores, int64_t columns);
// The same by a stable descending sort of whole rows (ATen, any device).
at::Tensor moba_best_blocks_by_sort(const at::Tensor& scores, int64_t columns);

}  // namespace sb
