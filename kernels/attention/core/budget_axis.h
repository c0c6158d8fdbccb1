#pragma once
// What an attention pattern's budget counts (AttentionBudgetRequest::top_k), and so how the
// balancing policies treat it (harness/balance/budget_policy.h):
//   kNone       the pattern takes no budget (dense): requests are ignored.
//   kKeyBlocks  key blocks of a unit of tokens per query (block): MoBA's k (blocks of
//               block_size tokens, the diagonal included), a window's width (units of one
//               token). The fixed budget is a number, k0; a budget of ceil(L / unit) or more
//               keeps every causal key of a sequence of L tokens.
//   kKeptKeys   kept keys per query, the mean over a sequence's queries and query heads
//               (an index's rule). The fixed budget is the pattern's own rule: no budget is
//               sent, and a sequence is predicted at what the rule chose for its length.

namespace sb {

enum class BudgetAxis { kNone, kKeyBlocks, kKeptKeys };

}  // namespace sb
