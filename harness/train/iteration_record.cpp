#include "harness/train/iteration_record.h"

#include <algorithm>
#include <numeric>

namespace sb {

double max_over_mean(const std::vector<double>& values) {
  if (values.empty()) return 1.0;
  const double mean =
      std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  if (mean <= 0) return 1.0;
  return *std::max_element(values.begin(), values.end()) / mean;
}

void IterationRecord::derive_single_stage_metrics() {
  imbalance = max_over_mean(microbatch_ms);
  const double busy = std::accumulate(microbatch_ms.begin(), microbatch_ms.end(), 0.0);
  per_stage_busy_ms = {busy};
  per_stage_idle_ms = {std::max(0.0, iter_ms - busy)};
  bubble_fraction = iter_ms > 0 ? per_stage_idle_ms[0] / iter_ms : 0.0;
  bubble_fraction_max = bubble_fraction;
}

nlohmann::json iteration_record_to_json(const IterationRecord& r) {
  return nlohmann::json{
      {"iteration", r.iteration},
      {"warmup", r.warmup},
      {"loss", r.loss},
      {"loss_tokens", r.loss_tokens},
      {"tokens", r.tokens},
      {"sequences", r.sequences},
      {"lr", r.lr},
      {"grad_norm", r.grad_norm},
      {"iter_ms", r.iter_ms},
      {"microbatch_ms", r.microbatch_ms},
      {"microbatch_tokens", r.microbatch_tokens},
      {"imbalance", r.imbalance},
      {"per_stage_busy_ms", r.per_stage_busy_ms},
      {"per_stage_idle_ms", r.per_stage_idle_ms},
      {"bubble_fraction", r.bubble_fraction},
      {"bubble_fraction_max", r.bubble_fraction_max},
      {"balance_overhead_ms", r.balance_overhead_ms},
  };
}

IterationRecord iteration_record_from_json(const nlohmann::json& j) {
  IterationRecord r;
  r.iteration = j.at("iteration").get<int64_t>();
  r.warmup = j.at("warmup").get<bool>();
  r.loss = j.at("loss").get<double>();
  r.loss_tokens = j.at("loss_tokens").get<int64_t>();
  r.tokens = j.at("tokens").get<int64_t>();
  r.sequences = j.at("sequences").get<int64_t>();
  r.lr = j.at("lr").get<double>();
  r.grad_norm = j.at("grad_norm").get<double>();
  r.iter_ms = j.at("iter_ms").get<double>();
  r.microbatch_ms = j.at("microbatch_ms").get<std::vector<double>>();
  r.microbatch_tokens = j.at("microbatch_tokens").get<std::vector<int64_t>>();
  r.imbalance = j.at("imbalance").get<double>();
  r.per_stage_busy_ms = j.at("per_stage_busy_ms").get<std::vector<double>>();
  r.per_stage_idle_ms = j.at("per_stage_idle_ms").get<std::vector<double>>();
  r.bubble_fraction = j.at("bubble_fraction").get<double>();
  r.bubble_fraction_max = j.at("bubble_fraction_max").get<double>();
  r.balance_overhead_ms = j.at("balance_overhead_ms").get<double>();
  return r;
}

}  // namespace sb
