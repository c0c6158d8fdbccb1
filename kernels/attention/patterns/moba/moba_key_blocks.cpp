#include "kernels/attention/patterns/moba/moba_key_blocks.h"

#include <ATen/ATen.h>
#include <ATen/OpMathType.h>

#include <tuple>
#include <vector>

#ifdef SB_WITH_CUDA
#include "kernels/attention/patterns/moba/cuda/moba_key_blocks_cuda.h"
#endif

namespace sb {
namespace {

void check_entries(const MobaKeyBlocks& blocks, const at::Tensor& keys, const char* what,
                   const MobaKeyBlockRuns* runs = nullptr) {
  TORCH_CHECK(blocks.entries.dim() == 2 && blocks.entries.size(1) == kKeyBlockFields &&
                  blocks.entries.scalar_type() == at::kLong && blocks.entries.is_contiguous(),
              what, ": entries must be contiguous int64 [E, ", int64_t{kKeyBlockFields}, "]");
  std::vector<const at::Tensor*> tables{&blocks.entries};
  if (runs != nullptr) tables.insert(tables.end(), {&runs->order, &runs->runs});
  for (const at::Tensor* t : tables) {
    TORCH_CHECK(t->device() == keys.device(), what, ": the key-block tables are on ", t->device(),
                ", the keys on ", keys.device());
  }
  TORCH_CHECK(keys.dim() == 3 && keys.is_contiguous(), what,
              ": keys must be contiguous [Tk, Hkv, D], got ", keys.sizes());
  // The kernels trust the entries; these are the bounds they were built for.
  TORCH_CHECK(keys.size(0) == blocks.source_tokens && keys.size(1) == blocks.source_heads, what,
              ": the entries index keys of ", blocks.source_tokens, " tokens x ", blocks.source_heads,
              " heads, got ", keys.sizes(), " (a plan used with another call's keys)");
}

}  // namespace

MobaKeyBlockRuns moba_key_block_runs(const MobaKeyBlocks& blocks) {
  const at::Tensor& entries = blocks.entries;
  const at::Tensor used = entries.select(1, kKeyBlockTokens).gt(0).nonzero().squeeze(1);
  const at::Tensor source = entries.index_select(0, used);
  const at::Tensor key = source.select(1, kKeyBlockHead) * blocks.source_tokens +
                         source.select(1, kKeyBlockSource);
  const auto [sorted_key, permutation] = at::sort(key, /*stable=*/true, /*dim=*/0, false);
  const at::Tensor counts = std::get<2>(at::unique_consecutive(sorted_key, false, true));
  return {used.index_select(0, permutation), at::cat({at::zeros({1}, counts.options()), counts.cumsum(0)})};
}

at::Tensor gather_key_blocks(const at::Tensor& x, const MobaKeyBlocks& blocks) {
  check_entries(blocks, x, "gather_key_blocks");
  at::Tensor out = at::empty({blocks.gathered_rows, 1, x.size(2)}, x.options());
#ifdef SB_WITH_CUDA
  if (x.is_cuda()) {
    gather_key_blocks_cuda(x, blocks, out);
    return out;
  }
#endif
  TORCH_CHECK(x.device().is_cpu(), "gather_key_blocks: no implementation for ", x.device());
  const at::Tensor entries = blocks.entries;
  for (int64_t e = 0; e < entries.size(0); ++e) {
    const MobaKeyBlockEntry entry = read_key_block_entry(entries.const_data_ptr<int64_t>(), e);
    if (entry.tokens == 0) continue;
    out.narrow(0, entry.target, entry.tokens)
        .select(1, 0)
        .copy_(x.narrow(0, entry.source, entry.tokens).select(1, entry.head));
  }
  return out;
}

void add_key_block_grads(at::Tensor& into, const at::Tensor& gathered_grad,
                         const MobaKeyBlocks& blocks, const MobaKeyBlockRuns& runs) {
  check_entries(blocks, into, "add_key_block_grads", &runs);
  const at::ScalarType acc = at::toOpMathType(gathered_grad.scalar_type());
  TORCH_CHECK(into.scalar_type() == acc, "add_key_block_grads: accumulates ",
              gathered_grad.scalar_type(), " gradients in ", acc, ", got ", into.scalar_type());
  TORCH_CHECK(gathered_grad.device() == into.device(), "add_key_block_grads: the gradient is on ",
              gathered_grad.device(), ", the accumulator on ", into.device());
  TORCH_CHECK(gathered_grad.dim() == 3 && gathered_grad.size(0) == blocks.gathered_rows &&
                  gathered_grad.size(1) == 1 && gathered_grad.size(2) == into.size(2),
              "add_key_block_grads: gradient of shape [", blocks.gathered_rows, ", 1, ",
              into.size(2), "] expected, got ", gathered_grad.sizes());
  const at::Tensor grad = gathered_grad.contiguous();
#ifdef SB_WITH_CUDA
  if (into.is_cuda()) {
    add_key_block_grads_cuda(into, grad, blocks, runs);
    return;
  }
#endif
  TORCH_CHECK(into.device().is_cpu(), "add_key_block_grads: no implementation for ",
              into.device());
  const int64_t* entries = blocks.entries.const_data_ptr<int64_t>();
  const int64_t* order = runs.order.const_data_ptr<int64_t>();
  const int64_t* bounds = runs.runs.const_data_ptr<int64_t>();
  for (int64_t r = 0; r + 1 < runs.runs.numel(); ++r) {
    const MobaKeyBlockEntry first = read_key_block_entry(entries, order[bounds[r]]);
    at::Tensor sum = at::zeros({first.tokens, into.size(2)}, into.options());
    for (int64_t i = bounds[r]; i < bounds[r + 1]; ++i) {
      const MobaKeyBlockEntry entry = read_key_block_entry(entries, order[i]);
      sum += grad.narrow(0, entry.target, entry.tokens).select(1, 0).to(acc);
    }
    into.narrow(0, first.source, first.tokens).select(1, first.head).add_(sum);
  }
}

}  // namespace sb
