#include "harness/latency/latency_calibration.h"

#include <stdexcept>
#include <string>

#include "common/length_bucket.h"

namespace sb {

LatencyCalibration::LatencyCalibration(double ema_alpha) : ema_alpha_(ema_alpha) {
  if (!(ema_alpha_ > 0 && ema_alpha_ <= 1)) {
    throw std::invalid_argument("latency calibration: ema_alpha must be in (0, 1], got " + std::to_string(ema_alpha_));
  }
}

double LatencyCalibration::factor(int64_t tokens) const {
  const auto it = buckets_.find(power_of_two_bucket(tokens));
  return it == buckets_.end() ? global_ : it->second;
}

void LatencyCalibration::observe(const std::vector<LatencyObservation>& iteration) {
  struct Sums {
    double measured = 0, predicted = 0;
  };
  std::map<int64_t, Sums> per_bucket;
  Sums all;
  for (const LatencyObservation& o : iteration) {
    if (!(o.predicted_ms > 0) || !(o.measured_ms > 0) || o.tokens < 1) continue;
    Sums& b = per_bucket[power_of_two_bucket(o.tokens)];
    b.measured += o.measured_ms;
    b.predicted += o.predicted_ms;
    all.measured += o.measured_ms;
    all.predicted += o.predicted_ms;
  }
  if (all.predicted <= 0) return;
  const auto blend = [this](double previous, const Sums& s) {
    return (1.0 - ema_alpha_) * previous + ema_alpha_ * (s.measured / s.predicted);
  };
  for (const auto& [bucket, sums] : per_bucket) {
    const auto it = buckets_.find(bucket);
    // A new bucket starts from the global factor, the best guess it had until now.
    buckets_[bucket] = blend(it == buckets_.end() ? global_ : it->second, sums);
  }
  global_ = blend(global_, all);
}

nlohmann::json LatencyCalibration::to_json() const {
  nlohmann::json buckets = nlohmann::json::object();
  for (const auto& [bucket, value] : buckets_) buckets[std::to_string(bucket)] = value;
  return {{"ema_alpha", ema_alpha_}, {"global", global_}, {"buckets", buckets}};
}

void LatencyCalibration::load_json(const nlohmann::json& state) {
  if (!state.is_object() || !state.contains("global") || !state["global"].is_number() ||
      !state.contains("buckets") || !state["buckets"].is_object()) {
    throw std::invalid_argument("latency calibration state: expected {\"global\": number, \"buckets\": {...}}");
  }
  std::map<int64_t, double> loaded;
  for (const auto& [key, value] : state["buckets"].items()) {
    if (!value.is_number() || !(value.get<double>() > 0)) {
      throw std::invalid_argument("latency calibration state: bucket " + key + " is not a positive number");
    }
    loaded[std::stoll(key)] = value.get<double>();
  }
  const double global = state["global"].get<double>();
  if (!(global > 0)) throw std::invalid_argument("latency calibration state: global must be positive");
  global_ = global;
  buckets_ = std::move(loaded);
}

}  // namespace sb
