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
#include "kernels/attention/packed_sequences.h"

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
// The kept lists from the complete scores (coverage left at 1: see kept_mass).
VerticalSlashHeadIndex vertical_slash_select(const std::vector<double>& vertical, const std::vector<double>& slash,
                                             int64_t n, const VerticalSlashParams& params);
// The attention mass on the entries `index` keeps (coverage = the complete mass / n).
double vertical_slash_kept_mass(const VerticalSlashHeadIndex& index, const double* attention,
                                const std::vector<int64_t>& key_positions, int64_t length, int64_t n);

// Whether query position i keeps key position j in a sequence of `length` tokens under
// `index` (false for j > i): the mask's rule, pair by pair, for tests
// (vertical_slash_blocks.h lists a whole query block's keys at once).
bool vertical_slash_keeps(const VerticalSlashHeadIndex& index, int64_t length, int64_t i, int64_t j);

}  // namespace sb
