#pragma once
// MoBA's harness side (attention_pattern_plugin.h): the manifest keys
//   {"name": "moba", "block_size": 256, "top_k": 32, "cuda_kernel": "auto"}
// (cuda_kernel: "auto" | "fused" | "flash_varlen", written back only when not "auto"), the
// profile flag --block, the bench variants moba-fused and moba-varlen, and the simulator's
// Zipf coverage model (moba_simulation.h) with its fit (moba_coverage_fit.h).

#include "harness/patterns/attention_pattern_plugin.h"

namespace sb {

const AttentionPatternPlugin& moba_plugin();

}  // namespace sb
