#pragma once
// The simulator's model of MTraining's vertical-slash pattern (docs/simulator.md, item 4;
// the pattern itself: docs/vertical_slash.md). A real run chooses each head's verticals
// and slashes from the last queries' attention; a simulation has no attention, so it
// models what the budgets, DST's floor and the ring's work need: how many keys each
// query keeps, and the coverage.
//
// [our rule] Shape. A sequence of L tokens runs at a level e >= 0, the keys a late query
// keeps besides the F forced ones (F = sink_tokens + local_window, the entries a head
// always keeps). Query i (0-based, n = i + 1 causal keys) keeps
//     n                                      when n <= F,
//     F + min(n - F, e x ((1 - u) + u n / L)) otherwise,
// u in [0, 1] the spread: with u = 0 every query keeps the same e extra keys (the kept
// columns and offsets sit near the sequence's start and near the diagonal, so early
// queries already reach them all); with u = 1 a query keeps a share of its past that grows
// with its position (columns and offsets spread over the whole sequence, each reaching
// only the queries after it). Kept keys per query K(L, e) is the mean over the queries
// (closed form, no loop). The extra keys lie between the sinks and the window
// (ring_vertical_slash_work.h).
//
// Coverage. A query's attention over its ranked causal keys falls as a Zipf law with
// exponent s, and it keeps its highest-ranked ones:
//     C(L, e) = mean over the last m = min(last_queries, L) queries of H(kept_i)(s) / H(i + 1)(s),
// H(x) = sum_{j <= x} j^-s, linear between integers (kept counts are fractional).
//
// The pattern's own rule (the reference, docs/vertical_slash.md "The index"):
//   top_k  e = rule_keys - F (at least 0): rule_keys, the keys a late query keeps, by
//          default sink + window + vertical_count + slash_count x block_size (a kept
//          offset brings about one key block per query in block form), or fitted to
//          the kept keys measured runs recorded (fit/vertical_slash_pattern_fit.h);
//   top_p  the smallest e with C(L, e) >= p.
// Every level is capped where a late query would keep more than min(L, max_verticals +
// max_slashes x block_size) keys (each kept offset reaching about one key block per query,
// as in rule_keys' default). Under a budget (kept keys per query b > 0, "Budgets"): the largest
// e with K(L, e) <= b (0 when none). DST's floor ratio r > 0 gives every sequence its
// floor, the smallest e <= the reference's with C(L, e) >= r C(L, reference) (recorded as
// the backend records it); a budgeted sequence runs max(budget's e, floor). A sequence
// without a budget runs the reference. Levels are found by bisection to 1e-9 of a key.

#include <cstdint>
#include <vector>

namespace sb {

struct VerticalSlashParams;

// How many keys the queries of one sequence keep (the shape above).
struct VerticalSlashShape {
  int64_t forced = 130;  // F
  double spread = 0.0;   // u

  // Keys query i (0-based) of a sequence of `length` keeps at level e.
  double query_keys(int64_t length, int64_t i, double level) const;
  // K(L, e): the mean over the sequence's queries.
  double kept_keys(int64_t length, double level) const;
  // The largest level whose K is <= kept (0 when none is; the level at which a late query
  // keeps every key when kept reaches the dense mean). Throws for length < 1.
  double level_for_kept_keys(int64_t length, double kept) const;
  // The level at which the last query keeps all L keys.
  double full_level(int64_t length) const;
};

struct VerticalSlashPatternRule {
  bool top_p = true;
  double p = 0.9;              // top_p
  int64_t rule_keys = 0;       // top_k: keys a late query keeps under the rule
  int64_t forced_keys = 130;   // sink_tokens + local_window
  int64_t most_keys = 8192;    // max_verticals + max_slashes x block_size
  int64_t last_queries = 64;
  double spread = 0.0;
};

// The kept keys per query the backend reports for a sequence: rounded to a whole key
// (vertical_slash_kept_keys_per_query), at least 1 as a budget.
int64_t kept_keys_as_budget(double kept_keys);

// The rule of a method's pattern; top_k's keys are the default above unless rule_keys > 0.
VerticalSlashPatternRule vertical_slash_pattern_rule(const VerticalSlashParams& params, int64_t rule_keys = 0,
                                                     double spread = 0.0);

// What one sequence runs with in the model.
struct VerticalSlashSequenceModel {
  double level = 0, reference_level = 0;
  double kept_keys = 0;            // K(L, level)
  double reference_kept_keys = 0;  // K(L, reference level)
  double floor_kept_keys = 0;      // K(L, floor's level); 0 without a floor request
  double coverage = 0;             // C(L, level)
};

class VerticalSlashPatternModel {
 public:
  // Throws std::invalid_argument for a negative exponent or a rule outside its ranges.
  VerticalSlashPatternModel(double exponent, VerticalSlashPatternRule rule);

  const VerticalSlashShape& shape() const { return shape_; }
  double coverage(int64_t length, double level) const;
  double most_level(int64_t length) const;
  double reference_level(int64_t length) const;
  double budget_level(int64_t length, double budget) const;
  // reference: reference_level(length).
  double floor_level(int64_t length, double ratio, double reference) const;

  // budget <= 0: the reference; ratio <= 0: no floor.
  VerticalSlashSequenceModel sequence(int64_t length, int64_t budget, double floor_ratio) const;

  double exponent() const { return exponent_; }
  const VerticalSlashPatternRule& rule() const { return rule_; }

 private:
  double harmonic(double x) const;  // H(x)(s), linear between integers, table grown on demand

  double exponent_;
  VerticalSlashPatternRule rule_;
  VerticalSlashShape shape_;
  mutable std::vector<double> harmonic_{0.0};
};

}  // namespace sb
