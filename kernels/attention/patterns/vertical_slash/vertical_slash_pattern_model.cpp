#include "kernels/attention/patterns/vertical_slash/vertical_slash_pattern_model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"

namespace sb {
namespace {

// Bisection on a monotone predicate over [lo, hi] (false, then true) to 1e-9: the bracket
// [last x with !pred, first x with pred]; {lo, lo} when pred(lo), {hi, hi} when none
// (pred(hi) is not evaluated).
template <class Pred>
std::pair<double, double> level_bracket(double lo, double hi, Pred pred) {
  if (pred(lo)) return {lo, lo};
  const double top = hi;
  bool found = false;
  for (int step = 0; step < 200 && hi - lo > 1e-9; ++step) {
    const double mid = lo + (hi - lo) / 2;
    if (pred(mid)) {
      hi = mid;
      found = true;
    } else {
      lo = mid;
    }
  }
  if (!found && !pred(hi)) return {top, top};
  return {lo, hi};
}

// About the smallest level with pred (its upper bracket end, where pred holds).
template <class Pred>
double first_level_where(double lo, double hi, Pred pred) {
  return level_bracket(lo, hi, pred).second;
}

// Sum over integers n in [x, y] (empty when x > y) of c0 + c1 n.
double linear_sum(double x, double y, double c0, double c1) {
  if (x > y) return 0;
  const double count = y - x + 1;
  return c0 * count + c1 * (x + y) * count / 2;
}

}  // namespace

double VerticalSlashShape::query_keys(int64_t length, int64_t i, double level) const {
  const auto n = static_cast<double>(i + 1);
  const auto F = static_cast<double>(forced);
  if (n <= F) return n;
  const double want = level * ((1 - spread) + spread * n / static_cast<double>(length));
  return F + std::min(n - F, want);
}

double VerticalSlashShape::kept_keys(int64_t length, double level) const {
  if (length < 1) throw std::invalid_argument("vertical-slash shape: length must be >= 1");
  const auto L = static_cast<double>(length);
  const auto F = static_cast<double>(std::min(forced, length));
  double sum = F * (F + 1) / 2;  // queries that keep every key before the forced ones run out
  if (length > forced) {
    // n = F + 1 .. L keep F + min(a(n), b(n)), a(n) = n - F, b(n) = alpha + beta n; a - b is
    // linear in n, so a <= b on one end of the range and a >= b on the other.
    const double alpha = level * (1 - spread), beta = level * spread / L;
    const double lo = F + 1, hi = L;
    const double slope = 1 - beta, offset = F + alpha;  // a - b = slope n - offset
    double a_lo = lo, a_hi = hi;                        // where a <= b (the a part)
    if (slope > 0) {
      a_hi = std::min(hi, std::floor(offset / slope));
    } else if (slope < 0) {
      a_lo = std::max(lo, std::ceil(offset / slope));
    }
    sum += F * (hi - lo + 1);
    if (a_lo > a_hi) {  // b everywhere
      sum += linear_sum(lo, hi, alpha, beta);
    } else {
      sum += linear_sum(a_lo, a_hi, -F, 1.0);
      sum += linear_sum(lo, a_lo - 1, alpha, beta) + linear_sum(a_hi + 1, hi, alpha, beta);
    }
  }
  return sum / L;
}

double VerticalSlashShape::full_level(int64_t length) const {
  return static_cast<double>(std::max<int64_t>(0, length - forced));
}

double VerticalSlashShape::level_for_kept_keys(int64_t length, double kept) const {
  const double full = full_level(length);
  if (kept_keys(length, full) <= kept) return full;
  if (kept_keys(length, 0) > kept) return 0;
  // The largest level whose K is <= kept: the lower end of the bracket around the first
  // level whose K exceeds it.
  return level_bracket(0, full, [&](double e) { return kept_keys(length, e) > kept; }).first;
}

int64_t kept_keys_as_budget(double kept_keys) { return std::max<int64_t>(1, std::llround(kept_keys)); }

VerticalSlashPatternRule vertical_slash_pattern_rule(const VerticalSlashParams& params, int64_t rule_keys,
                                                     double spread) {
  VerticalSlashPatternRule rule;
  rule.top_p = params.budget == VerticalSlashBudget::kTopP;
  rule.p = params.p;
  rule.forced_keys = params.sink_tokens + params.local_window;  // >= 1: every query keeps itself
  rule.most_keys = std::max(rule.forced_keys, params.max_verticals + params.max_slashes * params.block_size);
  rule.last_queries = params.last_queries;
  rule.rule_keys = rule_keys > 0 ? rule_keys
                                 : params.sink_tokens + params.local_window + params.vertical_count +
                                       params.slash_count * params.block_size;
  rule.spread = spread;
  return rule;
}

VerticalSlashPatternModel::VerticalSlashPatternModel(double exponent, VerticalSlashPatternRule rule)
    : exponent_(exponent), rule_(rule), shape_{rule.forced_keys, rule.spread} {
  if (!(exponent >= 0)) throw std::invalid_argument("vertical-slash pattern model: exponent must be >= 0");
  if (rule.top_p && !(rule.p > 0 && rule.p <= 1)) {
    throw std::invalid_argument("vertical-slash pattern model: p must be in (0, 1]");
  }
  if (!rule.top_p && rule.rule_keys < 1) throw std::invalid_argument("vertical-slash pattern model: rule_keys must be >= 1");
  if (rule.forced_keys < 1 || rule.most_keys < rule.forced_keys || rule.last_queries < 1) {
    throw std::invalid_argument("vertical-slash pattern model: need 1 <= forced_keys <= most_keys and last_queries >= 1");
  }
  if (!(rule.spread >= 0 && rule.spread <= 1)) {
    throw std::invalid_argument("vertical-slash pattern model: spread must be in [0, 1]");
  }
}

double VerticalSlashPatternModel::harmonic(double x) const {
  const auto whole = static_cast<int64_t>(std::floor(x));
  while (static_cast<int64_t>(harmonic_.size()) <= whole + 1) {
    const auto j = static_cast<double>(harmonic_.size());
    harmonic_.push_back(harmonic_.back() + std::pow(j, -exponent_));
  }
  const double fraction = x - static_cast<double>(whole);
  return harmonic_[static_cast<size_t>(whole)] +
         fraction * (harmonic_[static_cast<size_t>(whole) + 1] - harmonic_[static_cast<size_t>(whole)]);
}

double VerticalSlashPatternModel::coverage(int64_t length, double level) const {
  if (length < 1) throw std::invalid_argument("vertical-slash pattern model: length must be >= 1");
  const int64_t m = std::min(rule_.last_queries, length);
  double sum = 0;
  for (int64_t i = length - m; i < length; ++i) {
    sum += harmonic(shape_.query_keys(length, i, level)) / harmonic(static_cast<double>(i + 1));
  }
  return sum / static_cast<double>(m);
}

double VerticalSlashPatternModel::most_level(int64_t length) const {
  return static_cast<double>(std::max<int64_t>(0, std::min(length, rule_.most_keys) - rule_.forced_keys));
}

double VerticalSlashPatternModel::reference_level(int64_t length) const {
  const double most = most_level(length);
  if (!rule_.top_p) return std::clamp(static_cast<double>(rule_.rule_keys - rule_.forced_keys), 0.0, most);
  if (coverage(length, most) < rule_.p) return most;
  return first_level_where(0, most, [&](double e) { return coverage(length, e) >= rule_.p; });
}

double VerticalSlashPatternModel::budget_level(int64_t length, double budget) const {
  return std::min(shape_.level_for_kept_keys(length, budget), most_level(length));
}

double VerticalSlashPatternModel::floor_level(int64_t length, double ratio, double reference) const {
  const double target = ratio * coverage(length, reference);
  return first_level_where(0, reference, [&](double e) { return coverage(length, e) >= target; });
}

VerticalSlashSequenceModel VerticalSlashPatternModel::sequence(int64_t length, int64_t budget, double floor_ratio) const {
  VerticalSlashSequenceModel out;
  out.reference_level = reference_level(length);
  out.reference_kept_keys = shape_.kept_keys(length, out.reference_level);
  out.level = out.reference_level;
  // As the backend: the floor is computed for every sequence under a floor request, and
  // raises only the budgeted ones.
  const double floor = floor_ratio > 0 ? floor_level(length, floor_ratio, out.reference_level) : 0.0;
  if (floor_ratio > 0) out.floor_kept_keys = shape_.kept_keys(length, floor);
  if (budget > 0) out.level = std::max(budget_level(length, static_cast<double>(budget)), floor);
  out.kept_keys = shape_.kept_keys(length, out.level);
  out.coverage = coverage(length, out.level);
  return out;
}

}  // namespace sb
