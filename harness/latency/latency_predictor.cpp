#include "harness/latency/latency_predictor.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace sb {

LatencyPredictor::LatencyPredictor(LatencyProfile profile, LatencyPredictorOptions options)
    : profile_(std::move(profile)), options_(options) {
  profile_.validate();
  const size_t lengths = profile_.seq_lens.size();
  const size_t budgets = profile_.budgets.size();
  layer_monotone_.assign(budgets, std::vector<double>(lengths, 0.0));
  for (size_t i = 0; i < lengths; ++i) {
    double running = 0;
    for (size_t j = 0; j < budgets; ++j) {
      running = std::max(running, profile_.layer_ms[i][j].median);
      layer_monotone_[j][i] = running;
    }
    rest_.push_back(profile_.rest_ms[i].median);
    head_.push_back(profile_.head_ms[i].median);
  }
  if (profile_.packed_ms) {
    // n sequences of l0 tokens measured packed: n a(l0) + rest(n l0) - (n - 1) fixed = measured.
    const int64_t n = profile_.packed_count, l0 = profile_.seq_lens.front();
    const double a0 = attention_ms(l0, profile_.budgets.front());
    const double saved = static_cast<double>(n) * a0 + rest_ms(n * l0) - profile_.packed_ms->median;
    attention_fixed_ms_ = std::clamp(saved / static_cast<double>(n - 1), 0.0, a0);
  }
  if (!profile_.model_ms.empty() && profile_.model.contains("num_hidden_layers")) {
    const auto layers = profile_.model.at("num_hidden_layers").get<double>();
    const auto j = static_cast<size_t>(std::find(profile_.budgets.begin(), profile_.budgets.end(), profile_.model_budget) -
                                       profile_.budgets.begin());
    for (size_t i = 0; i < lengths; ++i) {
      const double parts = layers * layer_monotone_[j][i] + (options_.include_head ? head_[i] : 0.0);
      overhead_.push_back(profile_.model_ms[i].median - parts);
    }
  }
}

double LatencyPredictor::microbatch_overhead_ms(int64_t tokens) const {
  if (overhead_.empty()) return 0.0;
  // An overhead does not vanish with fewer tokens: constant below the grid.
  return along_length(overhead_, std::max(tokens, profile_.seq_lens.front()), /*clamp_at_zero=*/false);
}

double LatencyPredictor::microbatch_overhead_share_ms(int64_t tokens, int64_t stage, int64_t stages) const {
  if (stages < 1 || stage < 0 || stage >= stages) {
    throw std::invalid_argument("LatencyPredictor: stage " + std::to_string(stage) + " is not one of " +
                                std::to_string(stages) + " stages");
  }
  const double overhead = microbatch_overhead_ms(tokens);
  if (overhead_.empty()) return 0.0;
  // The head inside the overhead is measured on its own (head_ms): it belongs to the last stage.
  const double head = options_.include_head ? 0.0 : head_ms(tokens);
  return (overhead - head) / static_cast<double>(stages) + (stage == stages - 1 ? head : 0.0);
}

LatencyPredictor::LengthPoint LatencyPredictor::locate(int64_t length) const {
  const std::vector<int64_t>& grid = profile_.seq_lens;
  // Segment i + 1 is the first grid point from index 1 on that is >= length (the grid
  // ascends, validate()), the last segment beyond it.
  const auto first_at_or_above = std::lower_bound(grid.begin() + 1, grid.end(), length);
  const size_t i = std::min(static_cast<size_t>(first_at_or_above - grid.begin()) - 1, grid.size() - 2);
  const double x0 = static_cast<double>(grid[i]), x1 = static_cast<double>(grid[i + 1]);
  return LengthPoint{i, (static_cast<double>(length) - x0) / (x1 - x0)};
}

double LatencyPredictor::along_length(const std::vector<double>& series, LengthPoint length, bool clamp_at_zero) const {
  const size_t i = length.segment;
  const double value = series[i] + length.t * (series[i + 1] - series[i]);
  return clamp_at_zero ? std::max(0.0, value) : value;
}

double LatencyPredictor::along_length(const std::vector<double>& series, int64_t length, bool clamp_at_zero) const {
  return along_length(series, locate(length), clamp_at_zero);
}

LatencyPredictor::BudgetPoint LatencyPredictor::locate_budget(int64_t budget) const {
  const std::vector<int64_t>& budgets = profile_.budgets;
  const int64_t k = std::clamp(budget, budgets.front(), budgets.back());
  // Column j: the last whose successor is not below k (budgets ascend, validate()).
  const auto first_at_or_above = std::lower_bound(budgets.begin() + 1, budgets.end(), k);
  const size_t j = std::min(static_cast<size_t>(first_at_or_above - budgets.begin()) - 1, budgets.size() - 1);
  if (j + 1 == budgets.size() || k == budgets[j]) return BudgetPoint{j, 0.0, true};
  return BudgetPoint{j, static_cast<double>(k - budgets[j]) / static_cast<double>(budgets[j + 1] - budgets[j]), false};
}

double LatencyPredictor::layer_ms(int64_t length, int64_t budget) const {
  return layer_ms(locate(length), locate_budget(budget));
}

double LatencyPredictor::layer_ms(LengthPoint length, BudgetPoint budget) const {
  const double at_lo = along_length(layer_monotone_[budget.column], length);
  if (budget.exact) return at_lo;
  const double at_hi = along_length(layer_monotone_[budget.column + 1], length);
  return at_lo + budget.u * (at_hi - at_lo);
}

double LatencyPredictor::rest_ms(int64_t tokens) const { return along_length(rest_, tokens); }
double LatencyPredictor::rest_ms(LengthPoint tokens) const { return along_length(rest_, tokens); }

double LatencyPredictor::head_ms(int64_t tokens) const { return along_length(head_, tokens); }
double LatencyPredictor::head_ms(LengthPoint tokens) const { return along_length(head_, tokens); }

double LatencyPredictor::attention_ms(int64_t length, int64_t budget) const {
  return std::max(0.0, layer_ms(length, budget) - rest_ms(length));
}

double LatencyPredictor::packed_attention_ms(const std::vector<double>& terms) const {
  if (terms.empty()) throw std::invalid_argument("LatencyPredictor: empty micro-batch");
  double sum = 0, largest = 0;
  for (double t : terms) {
    sum += t;
    largest = std::max(largest, t);
  }
  return std::max(largest, sum - static_cast<double>(terms.size() - 1) * attention_fixed_ms_);
}

double LatencyPredictor::packed_layer_ms(const std::vector<int64_t>& lengths, const int64_t* budgets,
                                         int64_t budget) const {
  if (lengths.empty()) throw std::invalid_argument("LatencyPredictor: empty micro-batch");
  // packed_attention_ms over the terms, summed in the same order without holding them.
  int64_t total = 0;
  double sum = 0, largest = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 1) throw std::invalid_argument("LatencyPredictor: sequence length must be >= 1");
    total += lengths[i];
    const double term = attention_ms(lengths[i], budgets != nullptr ? budgets[i] : budget);
    sum += term;
    largest = std::max(largest, term);
  }
  const double attention = std::max(largest, sum - static_cast<double>(lengths.size() - 1) * attention_fixed_ms_);
  return attention + rest_ms(total);
}

double LatencyPredictor::packed_layer_ms(const std::vector<int64_t>& lengths, int64_t budget) const {
  return packed_layer_ms(lengths, nullptr, budget);
}

double LatencyPredictor::packed_layer_ms(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets) const {
  if (budgets.size() != lengths.size()) throw std::invalid_argument("LatencyPredictor: one budget per sequence needed");
  return packed_layer_ms(lengths, budgets.data(), 0);
}

double LatencyPredictor::stage_ms(const std::vector<int64_t>& lengths, const int64_t* budgets, int64_t budget,
                                  int64_t layers, bool last_stage) const {
  double ms = static_cast<double>(layers) * packed_layer_ms(lengths, budgets, budget);
  if (last_stage && options_.include_head) {
    int64_t total = 0;
    for (int64_t length : lengths) total += length;
    ms += head_ms(total);
  }
  return ms;
}

double LatencyPredictor::stage_ms(const std::vector<int64_t>& lengths, int64_t budget,
                                  int64_t layers, bool last_stage) const {
  return stage_ms(lengths, nullptr, budget, layers, last_stage);
}

double LatencyPredictor::stage_ms(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets,
                                  int64_t layers, bool last_stage) const {
  if (budgets.size() != lengths.size()) throw std::invalid_argument("LatencyPredictor: one budget per sequence needed");
  return stage_ms(lengths, budgets.data(), 0, layers, last_stage);
}

double LatencyPredictor::microbatch_ms(const std::vector<int64_t>& lengths, const int64_t* budgets, int64_t budget,
                                       int64_t total_layers) const {
  int64_t total = 0;
  for (int64_t length : lengths) total += length;
  const double ms = std::max(
      0.0, stage_ms(lengths, budgets, budget, total_layers, /*last_stage=*/true) + microbatch_overhead_ms(total));
  return microbatch_scale_ ? ms * microbatch_scale_(total) : ms;
}

double LatencyPredictor::microbatch_ms(const std::vector<int64_t>& lengths, int64_t budget,
                                       int64_t total_layers) const {
  return microbatch_ms(lengths, nullptr, budget, total_layers);
}

double LatencyPredictor::microbatch_ms(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets,
                                       int64_t total_layers) const {
  if (budgets.size() != lengths.size()) throw std::invalid_argument("LatencyPredictor: one budget per sequence needed");
  return microbatch_ms(lengths, budgets.data(), 0, total_layers);
}

}  // namespace sb
