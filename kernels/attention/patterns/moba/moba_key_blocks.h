#pragma once
// The key blocks one chunk of MoBA's varlen attention gathers (moba_varlen_attention.h,
// part 2), copied and summed back a whole block at a time.
//
// Each routing row (query head h, query block b) takes the keys of its selected blocks
// other than b itself (the diagonal), in ascending block order, from key/value head
// g = h / (Hq / Hkv), into consecutive rows of the gathered keys [rows, 1, D]. One entry per (row, selection slot) says which block goes
// where. Copying by entry instead of by an index per key row lets the kernel read each
// key row (D contiguous values, strided by Hkv in k) with wide loads and no index reads;
// summing the gradients per source block (entries sorted by source in the backward, the
// only pass that needs it) replaces atomic index_add and makes the key gradients
// bitwise repeatable.

#include <ATen/core/Tensor.h>
#include <c10/macros/Macros.h>

#include <cstdint>

namespace sb {

// Columns of MobaKeyBlocks::entries.
enum MobaKeyBlockField : int64_t {
  kKeyBlockSource = 0,  // first key token of the block in k / v
  kKeyBlockTokens,      // keys in the block; 0: an unused slot (padding or the diagonal)
  kKeyBlockTarget,      // first row of the block in the gathered keys
  kKeyBlockHead,        // key/value head g
  kKeyBlockFields
};

// One row of MobaKeyBlocks::entries, read the same way by the CPU loops and the CUDA
// kernels.
struct MobaKeyBlockEntry {
  int64_t source, tokens, target, head;
};
C10_HOST_DEVICE inline MobaKeyBlockEntry read_key_block_entry(const int64_t* entries, int64_t e) {
  const int64_t* f = entries + e * kKeyBlockFields;
  return {f[kKeyBlockSource], f[kKeyBlockTokens], f[kKeyBlockTarget], f[kKeyBlockHead]};
}

struct MobaKeyBlocks {
  at::Tensor entries;  // int64 [E, kKeyBlockFields], on the device of k
  int64_t gathered_rows = 0;  // rows of the gathered keys
  int64_t max_tokens = 0;     // no block has more keys (the layout's block size)
  int64_t source_tokens = 0;  // Tk and Hkv of the k / v the entries index (checked on use:
  int64_t source_heads = 0;   // the kernels do not bound-check each entry)
};

// The used entries (tokens > 0) ordered by source (head, first key), ties by entry index:
// order int64 [U]; runs int64 [R + 1]: order[runs[r] .. runs[r + 1]) share one source.
// On the entries' device; waits for it twice (the number of used entries, then of
// distinct sources).
struct MobaKeyBlockRuns {
  at::Tensor order, runs;
};
MobaKeyBlockRuns moba_key_block_runs(const MobaKeyBlocks& blocks);

// x [Tk, Hkv, D] contiguous -> [gathered_rows, 1, D]: the entries' blocks, each at its
// target rows. Every gathered row belongs to exactly one used entry.
at::Tensor gather_key_blocks(const at::Tensor& x, const MobaKeyBlocks& blocks);

// into [Tk, Hkv, D] (float for half, bfloat16 and float gradients, double for double)
// += the gradient of the gathered rows, gathered_grad [gathered_rows, 1, D], summed per
// source block in the runs' order before it is added: the same sums on every run.
void add_key_block_grads(at::Tensor& into, const at::Tensor& gathered_grad,
                         const MobaKeyBlocks& blocks, const MobaKeyBlockRuns& runs);

}  // namespace sb
