#include "kernels/attention/ring/ring_selection_timer.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "kernels/attention/core/device_completion.h"

namespace sb {

namespace {
double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

RingSelectionTimer::RingSelectionTimer(RingContext& context, int64_t call, c10::Device device)
    : context_(context), call_(call), device_(device), start_(std::chrono::steady_clock::now()) {}

void RingSelectionTimer::all_reduce(at::Tensor& tensor, const std::string& what) {
  wait_for_device_work(tensor.device());  // the local work before it is compute, not wait
  const auto start = std::chrono::steady_clock::now();
  context_.all_reduce(tensor, c10d::ReduceOp::SUM, what, call_);
  waited_s_ += seconds(std::chrono::steady_clock::now() - start);
}

void RingSelectionTimer::sum(std::vector<double>& values, const std::string& what) {
  if (context_.size() == 1 || values.empty()) return;
  at::Tensor tensor = at::tensor(values, at::kDouble).to(device_);
  all_reduce(tensor, what);
  const at::Tensor host = tensor.cpu();
  std::copy(host.const_data_ptr<double>(), host.const_data_ptr<double>() + host.numel(), values.begin());
}

void RingSelectionTimer::record() {
  const auto now = std::chrono::steady_clock::now();
  RingStepEvent event{call_, false, kRingSelectionStep, context_.rank()};
  event.start_s = seconds(start_.time_since_epoch());
  const double elapsed = seconds(now - start_);
  event.wait_s = std::min(waited_s_, elapsed);
  event.compute_s = elapsed - event.wait_s;
  context_.record(event);
}

}  // namespace sb
