#pragma once
// An attention pattern as a plug-in (docs/attention_patterns.md): which keys each query
// attends to, and everything the rest of the harness asks of it, behind one interface.
// A pattern is one folder here (patterns/<name>/: its float64 reference, CPU kernel,
// cuda/, backend, context-parallel selector and work model) and one under
// harness/patterns/<name>/ (its manifest keys, profile flags and fit hooks), listed once
// in harness/patterns/attention_patterns.cpp. No code outside those folders asks which
// pattern it holds.
//
// An AttentionPattern object is a configured pattern: a kind and its parameters (MoBA
// with blocks of 256 and k 32), immutable and shared (AttentionOptions holds one).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/attention/core/attention_backend.h"
#include "kernels/attention/core/budget_axis.h"
#include "kernels/attention/core/packed_sequences.h"
#include "kernels/attention/ring/ring_pattern_selector.h"

namespace sb {


// How a run trains, as far as a pattern's kernels care (manifest checks), and the names a
// message about it uses.
struct AttentionTrainingSetting {
  bool cuda = false;
  bool bf16 = false;       // bf16-mixed autocast (else float32)
  int64_t head_dim = 0;
  std::string precision;   // train.precision as the manifest spells it ("fp32")
  std::string method;      // "methods[0]"
  int64_t cp = 1;          // context-parallel ranks per micro-batch
};

// Why a pattern cannot train in a setting: the manifest key to name ("precision": the
// run's train.precision; "attention": the method's attention), what is wrong (the message
// after the key's JSON path) and the fix.
struct AttentionTrainingProblem {
  std::string key;
  std::string problem;
  std::string fix;
};

// `count` all-reduces of `bytes` each (a selection's collectives, for the simulator).
struct SelectionAllreduces {
  double bytes = 0;
  double count = 1;
};

class AttentionPattern {
 public:
  virtual ~AttentionPattern() = default;

  // ---- identity
  // Its manifest name ("moba") and its name in messages ("MoBA").
  virtual std::string name() const = 0;
  virtual std::string title() const = 0;
  // The same kind with the same parameters.
  virtual bool same(const AttentionPattern& other) const = 0;
  // The same kind keeping the same keys at the same budget (its default budget and the
  // parameters of other paths may differ): measured runs of such a pattern calibrate the
  // simulator's model of this one.
  virtual bool same_selection(const AttentionPattern& other) const { return same(other); }

  // ---- budgets
  virtual BudgetAxis budget_axis() const = 0;
  // kKeyBlocks: the fixed budget k0 (DST's reference); kKeptKeys: the kept keys per query
  // assumed before a layer reports the rule's own; kNone: 0.
  virtual int64_t default_budget() const { return 0; }
  // kKeyBlocks: the tokens one unit of budget reaches (MoBA: its block size).
  virtual int64_t budget_unit_tokens() const { return 1; }
  // Whether its layer statistics answer AttentionBudgetRequest::coverage_curve_up_to: the
  // coverage curve C(k) over its budget axis (MoBA's routing coverage; `eval.coverage`).
  virtual bool reports_coverage_curve() const { return false; }
  // The budgets a latency profile measures by default for samples of up to
  // longest_sample tokens; dst_k_max > 0: DST's cap, which the grid must reach. Ascending,
  // distinct; empty for kNone.
  virtual std::vector<int64_t> profile_budgets(int64_t /*longest_sample*/, int64_t /*dst_k_max*/) const { return {}; }

  // ---- latency profiles
  // What a profile records of the pattern besides its name: the parameters a layer's time
  // depends on ("block_size" and the like), as the profile's "attention" object holds them.
  // A profile serves a run only when they are equal.
  virtual std::vector<std::pair<std::string, int64_t>> profile_fields() const = 0;
  // The block size a profile records (0 where the pattern has none).
  int64_t profile_block_size() const;
  // Why a profile whose `field` is `measured` does not serve a run that needs `wanted`, as
  // the end of "<profile> was measured with ...": "MoBA blocks of 64 tokens, not 16", or
  // the field's value and the manifest key that sets it.
  virtual std::string profile_field_mismatch(const std::string& field, int64_t measured, int64_t wanted) const;

  // ---- running it
  // The one-rank backend (forward, backward, decoding, statistics). Throws
  // std::invalid_argument for parameters the kernels cannot run.
  virtual std::unique_ptr<AttentionBackend> make_backend() const = 0;
  // Under context parallelism (ring_pattern_selector.h); null: the pattern has no CP path.
  virtual std::shared_ptr<RingPatternSelector> make_ring_selector() const { return nullptr; }
  // Why it cannot train in `setting` (nullopt: it can).
  virtual std::optional<AttentionTrainingProblem> training_problem(const AttentionTrainingSetting& /*setting*/) const {
    return std::nullopt;
  }

  // ---- its work (analytic profiles, the simulator, benchmarks)
  // (query, key) pairs one sequence of `length` tokens attends at `budget` (on the budget
  // axis; ignored for kNone), per query head: exact where the pattern's choice depends on
  // the length only, the expectation otherwise (the formulas: docs/attention_patterns.md).
  virtual double attended_pairs(int64_t length, int64_t budget) const = 0;
  // Forward FLOPs of q_heads query heads of dimension head_dim spent on choosing the pairs
  // (MoBA's gate scores, an index), besides the 4 x head_dim per attended pair.
  virtual double selection_forward_flops(int64_t /*length*/, int64_t /*q_heads*/, int64_t /*head_dim*/) const {
    return 0.0;
  }

  // ---- its collectives (the simulator's model of them)
  // Under context parallelism: the all-reduces over the CP group its ring selector runs
  // before one layer's ring, in order, for a micro-batch of `lengths` with budgets or not
  // and a coverage floor or not; heads: one TP rank's (none: the selection needs nothing
  // of the other ranks).
  virtual std::vector<SelectionAllreduces> ring_selection_allreduces(const std::vector<int64_t>& /*lengths*/,
                                                                     bool /*budgeted*/, bool /*floor*/,
                                                                     int64_t /*query_heads*/, int64_t /*kv_heads*/,
                                                                     int64_t /*head_dim*/) const {
    return {};
  }
  // Under tensor parallelism: the small all-reduces over the TP ranks (statistics over
  // the head shards) one layer's forward adds, with a coverage floor or not and budgets or not.
  virtual double tensor_parallel_sums_per_layer(bool /*floor*/, bool /*budgeted*/) const { return 0.0; }

  // ---- checks and benchmarks on given inputs: q [T, Hq, D], k, v [T, Hkv, D] packed by
  // `sequences` (keys and queries the same tokens), any device.
  // The (query, key) pairs the pattern keeps on these inputs at its defaults, summed over
  // query heads.
  virtual double kept_pairs(const at::Tensor& q, const at::Tensor& k, const PackedSequences& sequences,
                            double scale) const = 0;
  // The pattern's float64 reference for the rows [first_row, T) of a single sequence
  // (sequences holds one), at its defaults: [T - first_row, Hq, D] float64 on the CPU.
  virtual at::Tensor reference_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const PackedSequences& sequences, double scale, int64_t first_row) const = 0;
  // The pattern's selection alone on these inputs (an index built from them), for timing it
  // apart from the attention; null where the selection is not worth timing apart.
  virtual std::function<void()> selection_step(const at::Tensor& /*q*/, const at::Tensor& /*k*/,
                                               const PackedSequences& /*sequences*/, double /*scale*/) const {
    return {};
  }
};

// A configured pattern as a value: what methods, profiles and benchmarks hold. Empty until
// set (the harness parses one from the manifest, or makes its default).
class AttentionOptions {
 public:
  AttentionOptions() = default;
  explicit AttentionOptions(std::shared_ptr<const AttentionPattern> pattern);

  bool empty() const { return pattern_ == nullptr; }
  // Throws std::logic_error when empty.
  const AttentionPattern& pattern() const;
  const std::shared_ptr<const AttentionPattern>& shared() const { return pattern_; }
  std::string name() const { return pattern().name(); }
  BudgetAxis budget_axis() const { return pattern().budget_axis(); }
  std::unique_ptr<AttentionBackend> make_backend() const { return pattern().make_backend(); }

  friend bool operator==(const AttentionOptions& a, const AttentionOptions& b);
  friend bool operator!=(const AttentionOptions& a, const AttentionOptions& b) { return !(a == b); }

 private:
  std::shared_ptr<const AttentionPattern> pattern_;
};

class RingAttentionBackend;  // kernels/attention/ring/ring_attention_backend.h

// The backend of `options` under context parallelism over `context`'s group: a ring that
// runs the pattern's selector. Throws std::invalid_argument naming the pattern when it has
// no CP path.
std::shared_ptr<RingAttentionBackend> make_context_parallel_backend(const AttentionOptions& options,
                                                                    std::shared_ptr<RingContext> context);

}  // namespace sb
