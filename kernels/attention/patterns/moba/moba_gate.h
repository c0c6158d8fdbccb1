#pragma once
// What MoBA's gate scores key blocks with (docs/sparsebalance.md 1.1):
// - kToken: every query token by itself, q_t . mean(K_j), as MoBA's paper and public
//   code route; each token keeps its own top-(k - 1) earlier blocks besides its own.
// - kBlock: [our rule] the mean query of each query block, mean(Q_i) . mean(K_j); one
//   choice holds for the whole block (block-sparse kernels, the earlier default).

#include "common/option_names.h"

namespace sb {

enum class MobaGate { kToken, kBlock };
const OptionNames<MobaGate>& moba_gate_options();  // "token" | "block"

}  // namespace sb
