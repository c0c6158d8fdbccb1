#pragma once
// Which part of each Qwen2 parameter a tensor-parallel rank holds (Megatron's layout),
// by module path:
//   column-parallel (output rows split, dim 0): q_proj, k_proj, v_proj (weight and bias:
//     whole heads, so each rank keeps Hq / tp query heads and their Hkv / tp GQA groups),
//     gate_proj, up_proj; their LoRA B (dim 0), their LoRA A whole on every rank
//   row-parallel (input columns split, dim 1): o_proj, down_proj; their LoRA A (dim 1),
//     their LoRA B whole
//   vocabulary-parallel (dim 0, vocab_parallel.h): embed_tokens, lm_head
//   whole on every rank: the RMSNorm weights
// A row-parallel projection returns partial sums that the sequence-parallel
// reduce-scatter adds up; LoRA stays exact because B (A_r x_r) summed over r is B A x.
// Parameters held whole receive only this rank's part of their gradient (its tokens
// for the norms under sequence parallelism, its columns for the LoRA factors), so their
// gradients are summed over the TP group (GradientSync).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>


namespace sb {

// The split dimension of the parameter `name` (module path, "layers.0.self_attn.q_proj.weight"),
// or -1 when every TP rank holds it whole.
int64_t tensor_parallel_split_dim(const std::string& name);

// Rank `rank`'s part of the full tensor `full` of parameter `name` (a copy; `full` itself
// when the parameter is held whole).
at::Tensor tensor_parallel_shard(const std::string& name, const at::Tensor& full, int64_t tp, int64_t rank);

}  // namespace sb
