#pragma once
// The float64 oracle for MoBA, either gate: the rules of moba_attention.h implemented a
// second time, densely and plainly with ATen ops (block means with mean(), ranks from a
// stable descending sort, the coverage floor by evaluating every k, a [Hq, n, L] mask
// on the full score matrix). For tests and for the error column of
// `sparsebalance bench attention`; memory grows as Hq * rows * L.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/core/packed_sequences.h"

namespace sb {

struct MobaReferenceResult {
  at::Tensor out;  // [rows, Hq, D] float64, differentiable with respect to q, k, v
  at::Tensor lse;  // [rows, Hq] float64
  // [Hq, NB, NB] bool: key block j is selected for query block i (global block ids);
  // rows of blocks without queries are false.
  at::Tensor block_selected;  // block gate only
  // Token gate only: [Hq, Tq, NB] bool, key block j is selected for query t.
  at::Tensor token_selected;
  std::vector<int64_t> top_k;
  std::vector<double> coverage;
  double coverage_mean = 1.0;
  int64_t k_floor = 0;
};

// q [Tq, Hq, D], k, v [Tk, Hkv, D] (any floating dtype; computed in float64 on the
// CPU), queries = the last query_sequences.length(s) positions of each sequence as in
// moba_attention_packed. Only query rows [row_begin, row_end) of q are attended
// (row_end < 0: all); routing and statistics always cover the whole call.
MobaReferenceResult moba_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const PackedSequences& query_sequences,
                                   const PackedSequences& key_sequences, const MobaParams& params,
                                   int64_t row_begin = 0, int64_t row_end = -1);

}  // namespace sb
