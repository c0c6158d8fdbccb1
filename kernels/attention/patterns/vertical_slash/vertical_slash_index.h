#pragma once
// MTraining's vertical-slash pattern: which keys each query of a sequence attends to,
// chosen per (sequence, query head) from the attention of the sequence's last queries
// (docs/vertical_slash.md; MTraining's rules in docs/sparsebalance.md section 2.1):
//
//   A[i, j]   softmax over j <= p_i of scale x q_i . k_j, for the last n = min(last_queries,
//             L) queries i of the sequence (positions p_i = L - n .. L - 1), the query
//             head's own key/value head (GQA)
//   vertical  v[j] = sum over i of A[i, j]             (a key column every query uses)
//   slash     s[d] = sum over i of A[i, p_i - d]        (a fixed offset back: a diagonal)
//   kept      verticals: the first sink_tokens columns, then the others by descending v
//             (ties: lower column first); slashes: offsets 0 .. local_window - 1, then the
//             others by descending s (ties: smaller offset first). Each list grows
//               top_p   while its mass (the sum of its scores) is below p x its total (n)
//               top_k   to vertical_count / slash_count entries besides the forced ones
//             and never past max_verticals / max_slashes entries in all.
//   mask      block form (MTraining's kernels): queries and keys are cut into blocks of
//             block_size tokens; query i keeps key j <= i when j is a kept vertical or
//             j's key block is one a kept slash reaches from i's query block (some query
//             i' of the block has i' - d in it). block_size 1 keeps exactly the pairs
//             with i - j a kept slash (vertical_slash_blocks.h lists a block's keys)
//   coverage  the last queries' attention mass on their kept keys, over n: the share of
//             attention the pattern keeps where it was measured (C(k)'s role in DST)
//
// The index is computed in float64 from the given q and k (n x L scores per head: small
// next to the attention itself).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/option_names.h"
#include "kernels/attention/core/packed_sequences.h"

namespace sb {

enum class VerticalSlashBudget { kTopP, kTopK };
const OptionNames<VerticalSlashBudget>& vertical_slash_budget_options();  // "top_p" | "top_k"

// A field of VerticalSlashParams that breaks its rules.
struct VerticalSlashParamsProblem {
  std::string field;    // "p", "local_window", ...
  std::string message;  // "must be in (0, 1]"
  std::string fix;      // "e.g. 0.9"
};

struct VerticalSlashParams {
  VerticalSlashBudget budget = VerticalSlashBudget::kTopP;
  double p = 0.9;              // top_p: the share of each score mass to keep
  int64_t vertical_count = 1000;  // top_k: verticals besides the sinks
  int64_t slash_count = 6096;     // top_k: slashes besides the local window
  int64_t max_verticals = 4096;
  int64_t max_slashes = 4096;
  int64_t sink_tokens = 30;    // first columns always kept
  int64_t local_window = 100;  // offsets 0 .. local_window - 1 always kept
  int64_t last_queries = 64;
  int64_t block_size = 64;     // slashes reach whole key blocks of this many tokens

  // The first field that breaks the rules above, if any (the manifest parser names its
  // JSON path from it); validate() throws std::invalid_argument naming it.
  std::optional<VerticalSlashParamsProblem> first_problem() const;
  void validate() const;
};

// Every field equal: the same pattern.
bool operator==(const VerticalSlashParams& a, const VerticalSlashParams& b);
inline bool operator!=(const VerticalSlashParams& a, const VerticalSlashParams& b) { return !(a == b); }


// One (sequence, query head)'s pattern.
struct VerticalSlashHeadIndex {
  std::vector<int64_t> verticals;  // key positions in the sequence, ascending
  std::vector<int64_t> slashes;    // offsets (query position - key position), ascending
  double coverage = 1.0;
  int64_t block_size = 64;  // the mask's query and key blocks (VerticalSlashParams::block_size)
};

// [sequence][query head]. q [T, Hq, D], k [T, Hkv, D] packed by `sequences` (keys and
// queries the same tokens), Hq % Hkv == 0; scale: the softmax scale (1 / sqrt(D)).
std::vector<std::vector<VerticalSlashHeadIndex>> vertical_slash_index(const at::Tensor& q, const at::Tensor& k,
                                                                      const PackedSequences& sequences,
                                                                      const VerticalSlashParams& params,
                                                                      double scale);

// The index's steps, for callers that hold only some of a sequence's keys (context
// parallelism: each rank adds its keys' share, the sums are all-reduced, and every rank
// selects from the same numbers). attention [n, m]: the last n queries' attention
// (positions length - n ..) to the keys at key_positions (ascending positions in the
// sequence); entries past a query's position are ignored.
// Adds each entry to vertical[j] and slash[p - j] ([length] each).
void vertical_slash_add_scores(const double* attention, const std::vector<int64_t>& key_positions, int64_t length,
                               int64_t n, std::vector<double>& vertical, std::vector<double>& slash);
// The kept lists from the complete scores (coverage left at 1: see
// vertical_slash_block_columns_kept_mass).
VerticalSlashHeadIndex vertical_slash_select(const std::vector<double>& vertical, const std::vector<double>& slash,
                                             int64_t n, const VerticalSlashParams& params);
// The attention mass on the entries `index` keeps (coverage = the complete mass / n), from
// the head's query block columns: block_columns [blocks, length] (contiguous), the last n
// queries' attention to every key summed over the rows of each query block they span
// (vertical_slash_query_block_columns, vertical_slash_index_on_device.h). A query block
// keeps the same keys for all its rows, so its kept mass is a sum over its kept keys:
// O(blocks x kept keys), not O(n x kept keys); the budget search calls it at many levels.
double vertical_slash_block_columns_kept_mass(const VerticalSlashHeadIndex& index, const double* block_columns,
                                              int64_t length, int64_t n);

// One list (verticals or slashes) of one head under every budget: the forced entries
// 0 .. forced - 1 (fewer in a shorter sequence), then the candidates the cap lets in, in
// the order the list takes them (descending score, ties: lower index), with the list's
// mass (the sum of its scores, forced entries included) before each. top_p p takes the
// candidates before the first whose mass_before >= p x n; top_k the first `count`.
// vertical_slash_select is this ladder cut at its budget; the budget search
// (vertical_slash_budget.h) cuts it at other levels.
struct VerticalSlashLadder {
  int64_t forced = 0;
  std::vector<int64_t> order;
  std::vector<double> mass_before;  // [order.size()], nondecreasing (scores are attention masses)

  // scores [L]: the vertical or slash scores; cap: the most entries, forced ones included.
  VerticalSlashLadder(const std::vector<double>& scores, int64_t forced, int64_t cap);
  // Candidates taken while the list's mass is below `mass` (top-p at p = mass / n).
  int64_t taken_below(double mass) const;
  // The forced entries and the first `taken` candidates, ascending.
  std::vector<int64_t> kept(int64_t taken) const;
};

// Both lists of one head (sinks and max_verticals, window and max_slashes from params).
struct VerticalSlashLadders {
  VerticalSlashLadder vertical;
  VerticalSlashLadder slash;
  int64_t block_size;

  VerticalSlashLadders(const std::vector<double>& vertical_scores, const std::vector<double>& slash_scores,
                       const VerticalSlashParams& params);
  // Both lists cut as top-p cuts them at p = mass / n (coverage left at 1).
  VerticalSlashHeadIndex at(double mass) const;
};
// vertical_slash_select on ladders already built (the budget search reuses them).
VerticalSlashHeadIndex vertical_slash_select(const VerticalSlashLadders& ladders, int64_t n,
                                             const VerticalSlashParams& params);

// The one-rank index's steps for one (sequence, query head), for the budget search that
// re-cuts the lists (vertical_slash_budget.h). Checks q [T, Hq, D] and k [T, Hkv, D]
// against the packing (Hq % Hkv == 0).
void vertical_slash_check_inputs(const at::Tensor& q, const at::Tensor& k, const PackedSequences& sequences);
// Sequence s's last n = min(last_queries, L) queries [n, Hq, D] and its keys [L, Hkv, D],
// detached, in float64; L > 0.
struct VerticalSlashSequenceInputs {
  at::Tensor last_queries;
  at::Tensor keys;
  int64_t length = 0;
  int64_t n = 0;
  int64_t group = 1;  // query heads per key/value head

  VerticalSlashSequenceInputs(const at::Tensor& q, const at::Tensor& k, const PackedSequences& sequences, int64_t s,
                              int64_t last_queries);
  // Query head h's last queries' attention to the sequence's keys, [n, L] float64
  // contiguous on the host (computed on q's device), 0 past each query's position.
  at::Tensor attention(int64_t head, double scale) const;
};
// The vertical and slash scores of a whole sequence's attention [n, L] (every key held).
struct VerticalSlashScores {
  std::vector<double> vertical;  // [L]
  std::vector<double> slash;     // [L]
};
VerticalSlashScores vertical_slash_scores(const at::Tensor& attention, int64_t length);
// The coverage of `index` on a whole sequence's attention [n, L]: kept mass / n.
double vertical_slash_coverage(const VerticalSlashHeadIndex& index, const at::Tensor& attention, int64_t length);

// Whether query position i keeps key position j in a sequence of `length` tokens under
// `index` (false for j > i): the mask's rule, pair by pair, for tests
// (vertical_slash_blocks.h lists a whole query block's keys at once).
bool vertical_slash_keeps(const VerticalSlashHeadIndex& index, int64_t length, int64_t i, int64_t j);

}  // namespace sb
