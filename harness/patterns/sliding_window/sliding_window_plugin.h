#pragma once
// Sliding-window attention's harness side (attention_pattern_plugin.h): the manifest keys
//   {"name": "sliding_window", "window": 512, "sink_tokens": 4, "block_size": 64},
// the profile flags --sink-tokens and --block, `bench attention`'s window from its MoBA
// flags (--top-k x --block: the keys per query of a MoBA budget), and the simulator's
// coverage model (sliding_window_simulation.h; no fit: its exponent is given).

#include "harness/patterns/attention_pattern_plugin.h"

namespace sb {

const AttentionPatternPlugin& sliding_window_plugin();

}  // namespace sb
