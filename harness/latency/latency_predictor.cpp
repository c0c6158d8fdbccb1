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

double LatencyPredictor::along_length(const std::vector<double>& series, int64_t length, bool clamp_at_zero) const {
  const std::vector<int64_t>& grid = profile_.seq_lens;
  // Segment [grid[i], grid[i + 1]] containing length, or the nearest one outside.
  size_t i = 0;
  while (i + 2 < grid.size() && length > grid[i + 1]) ++i;
  const double x0 = static_cast<double>(grid[i]), x1 = static_cast<double>(grid[i + 1]);
  const double t = (static_cast<double>(length) - x0) / (x1 - x0);
  const double value = series[i] + t * (series[i + 1] - series[i]);
  return clamp_at_zero ? std::max(0.0, value) : value;
}

double LatencyPredictor::layer_ms(int64_t length, int64_t budget) const {
  const std::vector<int64_t>& budgets = profile_.budgets;
  const int64_t k = std::clamp(budget, budgets.front(), budgets.back());
  size_t j = 0;
  while (j + 1 < budgets.size() && k > budgets[j + 1]) ++j;
  const double at_lo = along_length(layer_monotone_[j], length);
  if (j + 1 == budgets.size() || k == budgets[j]) return at_lo;
  const double at_hi = along_length(layer_monotone_[j + 1], length);
  const double u = static_cast<double>(k - budgets[j]) / static_cast<double>(budgets[j + 1] - budgets[j]);
  return at_lo + u * (at_hi - at_lo);
}

double LatencyPredictor::rest_ms(int64_t tokens) const { return along_length(rest_, tokens); }

double LatencyPredictor::head_ms(int64_t tokens) const { return along_length(head_, tokens); }

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

double LatencyPredictor::packed_layer_ms(const std::vector<int64_t>& lengths, int64_t budget) const {
  return packed_layer_ms(lengths, std::vector<int64_t>(lengths.size(), budget));
}

double LatencyPredictor::packed_layer_ms(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets) const {
  if (lengths.empty()) throw std::invalid_argument("LatencyPredictor: empty micro-batch");
  if (budgets.size() != lengths.size()) throw std::invalid_argument("LatencyPredictor: one budget per sequence needed");
  int64_t total = 0;
  std::vector<double> terms;
  terms.reserve(lengths.size());
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 1) throw std::invalid_argument("LatencyPredictor: sequence length must be >= 1");
    total += lengths[i];
    terms.push_back(attention_ms(lengths[i], budgets[i]));
  }
  return packed_attention_ms(terms) + rest_ms(total);
}

double LatencyPredictor::stage_ms(const std::vector<int64_t>& lengths, int64_t budget,
                                  int64_t layers, bool last_stage) const {
  return stage_ms(lengths, std::vector<int64_t>(lengths.size(), budget), layers, last_stage);
}

double LatencyPredictor::stage_ms(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets,
                                  int64_t layers, bool last_stage) const {
  double ms = static_cast<double>(layers) * packed_layer_ms(lengths, budgets);
  if (last_stage && options_.include_head) {
    int64_t total = 0;
    for (int64_t length : lengths) total += length;
    ms += head_ms(total);
  }
  return ms;
}

double LatencyPredictor::microbatch_ms(const std::vector<int64_t>& lengths, int64_t budget,
                                       int64_t total_layers) const {
  return microbatch_ms(lengths, std::vector<int64_t>(lengths.size(), budget), total_layers);
}

double LatencyPredictor::microbatch_ms(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets,
                                       int64_t total_layers) const {
  int64_t total = 0;
  for (int64_t length : lengths) total += length;
  const double ms =
      std::max(0.0, stage_ms(lengths, budgets, total_layers, /*last_stage=*/true) + microbatch_overhead_ms(total));
  return microbatch_scale_ ? ms * microbatch_scale_(total) : ms;
}

}  // namespace sb
