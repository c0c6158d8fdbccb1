#pragma once
// A selection's time on the ring's timeline (ring_pattern_selector.h): one event of step
// kRingSelectionStep per attention call, its local work as compute and the all-reduces
// that complete its statistics over the CP group as wait.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attention/ring/ring_attention.h"

namespace sb {

class RingSelectionTimer {
 public:
  // Starts the clock. device: where the all-reduced tensors live (an NCCL group takes
  // device tensors only).
  RingSelectionTimer(RingContext& context, int64_t call, c10::Device device);

  // Sums `tensor` over the CP group in place (RingContext::all_reduce), timed as wait.
  void all_reduce(at::Tensor& tensor, const std::string& what);
  // The same for a host vector of float64 (a no-op for cp = 1).
  void sum(std::vector<double>& values, const std::string& what);
  // Records the event: from the start until now, the all-reduces as wait, the rest as compute.
  void record();

 private:
  RingContext& context_;
  int64_t call_;
  c10::Device device_;
  std::chrono::steady_clock::time_point start_;
  double waited_s_ = 0.0;
};

}  // namespace sb
