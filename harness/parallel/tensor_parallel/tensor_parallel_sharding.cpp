#include "harness/parallel/tensor_parallel/tensor_parallel_sharding.h"

#include <stdexcept>

#include "harness/parallel/tensor_parallel/vocab_parallel.h"

namespace sb {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool is_column_parallel(const std::string& name) {
  for (const char* p : {".q_proj.", ".k_proj.", ".v_proj.", ".gate_proj.", ".up_proj."}) {
    if (contains(name, p)) return true;
  }
  return false;
}

bool is_row_parallel(const std::string& name) { return contains(name, ".o_proj.") || contains(name, ".down_proj."); }

}  // namespace

int64_t tensor_parallel_split_dim(const std::string& name) {
  if (name == "embed_tokens.weight" || name == "lm_head.weight") return 0;
  const bool lora_a = ends_with(name, ".lora_A.weight"), lora_b = ends_with(name, ".lora_B.weight");
  if (is_column_parallel(name)) return lora_a ? -1 : 0;  // weight, bias, lora_B: output rows
  if (is_row_parallel(name)) return lora_b ? -1 : 1;     // weight, lora_A: input columns
  return -1;                                              // norms
}

at::Tensor tensor_parallel_shard(const std::string& name, const at::Tensor& full, int64_t tp, int64_t rank) {
  const int64_t dim = tensor_parallel_split_dim(name);
  if (dim < 0 || tp == 1) return full;
  const ShardRange range = split_range(full.size(dim), tp, rank);
  return full.narrow(dim, range.start, range.size()).clone();
}

}  // namespace sb
