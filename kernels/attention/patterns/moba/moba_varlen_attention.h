#pragma once
// MoBA's attention built from variable-length attention calls, the way MoBA's own
// reference reaches speed on GPUs:
//   1. the diagonal blocks: one varlen call, segment i = query block i against its own
//      block's keys, causal (bottom-right aligned: the last query sees every key);
//   2. the selected earlier blocks: per routing row (query head h, query block b) one
//      segment of the queries of b (head h) against the gathered keys of its selected
//      blocks (key/value head h / group), not causal; rows are processed in chunks so
//      the gathered keys stay within a memory budget;
//   3. the two partial results merged per (query, head) by log-sum-exp.
// Under the token gate (moba_token_varlen_plan.h) part 2's segments are (query head h,
// key block j) with the queries of head h that chose j; a (query, head) then has up to
// kcap - 1 partial results, each kept in its own slot and merged in slot order (no
// atomics: the sums repeat bit for bit).
// The backward calls the varlen backward of both parts with the MERGED output and
// log-sum-exp (flash-attention's convention: P = exp(S * scale - lse), delta =
// rowsum(dO * O)), which gives exactly the gradient of the merged attention.
//
// The varlen op is a parameter: LibTorch's flash-attention on CUDA; a float64 oracle
// in the CPU tests, which checks this whole pipeline without a GPU.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/patterns/moba/moba_key_blocks.h"
#include "kernels/attention/core/block_layout.h"
#include "kernels/attention/core/varlen_attention_ops.h"

namespace sb {

// One chunk of routing rows of part 2: the query rows and key blocks to gather.
struct MobaVarlenChunk {
  at::Tensor q_index;    // [nq] int64: rows of q.view(Tq * Hq, D), segment by segment
  // Token plans: [nq] int64, the slot of each gathered query's partial result:
  // row * slots + its selection slot (row = query * Hq + head).
  at::Tensor slot_index;
  MobaKeyBlocks key_blocks;  // the nk gathered keys, block by block: kcap entries per row
  at::Tensor cu_q, cu_k;  // [rows + 1] int32
  int64_t max_q = 0, max_k = 0;
};

struct MobaVarlenPlan {
  // Part 1: segments = query blocks; keys = k itself when every block holds queries
  // (training), else the diagonal blocks' keys gathered by self_kv_index ([n] int64
  // rows of k). cu arrays int32 on the device.
  at::Tensor self_cu_q, self_cu_k, self_kv_index;
  int64_t self_max_q = 0, self_max_k = 0;
  std::vector<MobaVarlenChunk> chunks;
  // 0: a block plan (each (query, head) in at most one segment of part 2); > 0: a token
  // plan, partial results of part 2 kept in this many slots per (query, head).
  int64_t slots = 0;
  bool causal = true;
  double scale = 1.0;
};

// Builds the plan on q's device. gathered_bytes_per_chunk bounds the gathered keys
// and values of one chunk (a row larger than that gets a chunk of its own).
MobaVarlenPlan moba_varlen_plan(const BlockLayout& layout, const MobaRouting& routing,
                                int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                                int64_t element_bytes, double scale,
                                int64_t gathered_bytes_per_chunk = int64_t{1} << 30);

// values on device as dtype (int32 offsets are checked not to overflow).
at::Tensor moba_index_tensor(const std::vector<int64_t>& values, at::ScalarType dtype, const at::Device& device);

// Part 1 of either plan (every query block against its own block) into plan, on device.
void moba_varlen_plan_diagonal(const BlockLayout& layout, const at::Device& device, MobaVarlenPlan& plan);

// Fills q_index and key_blocks of chunk rows (row = head * NB + block) from the routing:
// selected [Hq, NB, kcap] and table = block_layout_table(layout), both on the device;
// entry i * kcap + s holds selection slot s of row i when that is an earlier block (in
// ascending block order, packed from the row's cu_k), else nothing (tokens 0). cu_q,
// cu_k: the chunk's offsets on the host (the values of the chunk's device arrays).
void moba_build_varlen_indices(const at::Tensor& selected, const at::Tensor& table,
                               const std::vector<int64_t>& rows, const std::vector<int64_t>& cu_q,
                               const std::vector<int64_t>& cu_k, int64_t q_heads,
                               int64_t kv_heads, int64_t total_keys, int64_t block_size,
                               MobaVarlenChunk& chunk);

// out [Tq, Hq, D] (differentiable with respect to q, k, v) and lse [Tq, Hq].
std::pair<at::Tensor, at::Tensor> moba_varlen_attention(const at::Tensor& q, const at::Tensor& k,
                                                        const at::Tensor& v,
                                                        const MobaVarlenPlan& plan,
                                                        const VarlenAttentionOps& ops);

}  // namespace sb
