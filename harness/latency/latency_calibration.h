#pragma once
// Online calibration of predicted micro-batch latency against measured latency
// ([our rule], docs/sparsebalance.md section 3; off unless a method sets latency_calibration). A
// profile is measured once, but the machine that runs the training is not the machine
// that was profiled minutes before: shared hosts slow down and speed up (15-25 % within
// one 10-minute invocation was measured here), clocks throttle, and a pipeline stage has
// fixed costs a one-process timing does not see. Calibration follows that:
//   - factor(T) multiplies a micro-batch's predicted latency; T = its total tokens;
//   - per power-of-two bucket of T (floor(log2 T)) a factor, prior 1;
//   - after each iteration, per bucket with micro-batches that have both a prediction and
//     a measurement: r = sum measured / sum uncalibrated predicted over them, then
//       f_b <- (1 - alpha) f_b + alpha r;
//     and over all of them, the same for the global factor g;
//   - a bucket never observed uses g (a slower machine is slower at every length).
// The state goes into checkpoints with the rest of the planner's.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <vector>

namespace sb {

struct LatencyObservation {
  int64_t tokens = 0;           // the micro-batch's total tokens
  double predicted_ms = 0;      // uncalibrated prediction
  double measured_ms = 0;
};

class LatencyCalibration {
 public:
  // Throws std::invalid_argument unless alpha is in (0, 1].
  explicit LatencyCalibration(double ema_alpha);

  double factor(int64_t tokens) const;
  // One iteration's micro-batches; entries without a positive prediction and measurement
  // are skipped.
  void observe(const std::vector<LatencyObservation>& iteration);

  nlohmann::json to_json() const;
  // Replaces the state; throws std::invalid_argument for a malformed state.
  void load_json(const nlohmann::json& state);

  double ema_alpha() const { return ema_alpha_; }

 private:
  double ema_alpha_;
  double global_ = 1.0;
  std::map<int64_t, double> buckets_;  // floor(log2 tokens) -> factor
};

}  // namespace sb
