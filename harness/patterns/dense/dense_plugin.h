#pragma once
// Dense attention's harness side (attention_pattern_plugin.h): no manifest keys beside its
// name, the bench variant dense-flash (SDPA pinned to flash-attention), and a simulation
// without budget or coverage (dense_simulation.h).

#include "harness/patterns/attention_pattern_plugin.h"

namespace sb {

const AttentionPatternPlugin& dense_plugin();

}  // namespace sb
