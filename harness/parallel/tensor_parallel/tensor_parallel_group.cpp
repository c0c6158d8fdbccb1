#include "harness/parallel/tensor_parallel/tensor_parallel_group.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

#include "harness/parallel/error_text.h"
#include "harness/trace/timeline.h"
#include "kernels/attention/core/device_completion.h"

namespace sb {
namespace {

// Appends its scope's [start, end) to `intervals`. The work queued before it on the
// device is compute: the interval starts once it has finished (a GPU's stream may still
// be running the layer that made the collective's input).
class ScopedInterval {
 public:
  ScopedInterval(std::vector<TensorParallelGroup::Interval>& intervals, const c10::Device& device)
      : intervals_(intervals), start_ms_((wait_for_device_work(device), CommonClock::local_now_ms())) {}
  ~ScopedInterval() { intervals_.push_back({start_ms_, CommonClock::local_now_ms()}); }

 private:
  std::vector<TensorParallelGroup::Interval>& intervals_;
  double start_ms_;
};

}  // namespace

TensorParallelGroup::TensorParallelGroup(c10::intrusive_ptr<c10d::Backend> group, int64_t size, int64_t rank,
                                         std::chrono::milliseconds timeout, std::string who)
    : group_(std::move(group)), size_(size), rank_(rank), timeout_(timeout), who_(std::move(who)) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw std::invalid_argument("TensorParallelGroup: rank " + std::to_string(rank) + " of " + std::to_string(size));
  }
  if (size > 1 && !group_) throw std::invalid_argument("TensorParallelGroup: tp " + std::to_string(size) + " needs a group");
}

std::string TensorParallelGroup::collectives_name() const {
  if (!group_) return "";
  return group_->getBackendName() == "nccl" ? "nccl" : "gloo";
}

void TensorParallelGroup::wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what,
                               const c10::Device& device) const {
  try {
    wait_until_usable(work, timeout_, device);
  } catch (const std::exception& e) {
    throw std::runtime_error(who_ + ": tensor-parallel " + what + " failed (a TP peer stopped or timed out after " +
                             std::to_string(timeout_.count() / 1000) + " s): " + error_text(e));
  }
}

at::Tensor TensorParallelGroup::all_gather_rows(const at::Tensor& x) {
  if (size_ == 1) return x;
  ScopedInterval timed(intervals_, x.device());
  std::vector<at::Tensor> input{x.contiguous()};
  std::vector<std::vector<at::Tensor>> output(1);
  for (int64_t r = 0; r < size_; ++r) output[0].push_back(at::empty_like(input[0]));
  wait(group_->allgather(output, input), "all-gather", x.device());
  return at::cat(output[0], 0);
}

at::Tensor TensorParallelGroup::reduce_scatter_rows(const at::Tensor& x) {
  if (size_ == 1) return x;
  if (x.size(0) % size_ != 0) {
    throw std::logic_error("TensorParallelGroup::reduce_scatter_rows: " + std::to_string(x.size(0)) +
                           " rows do not divide by tp " + std::to_string(size_));
  }
  ScopedInterval timed(intervals_, x.device());
  const int64_t rows = x.size(0) / size_;
  if (group_->getBackendName() == "nccl") {
    std::vector<at::Tensor> output{at::empty_like(x.narrow(0, 0, rows))};
    std::vector<std::vector<at::Tensor>> input(1);
    for (int64_t r = 0; r < size_; ++r) input[0].push_back(x.narrow(0, r * rows, rows).contiguous());
    c10d::ReduceScatterOptions sum;
    sum.reduceOp = c10d::ReduceOp::SUM;
    wait(group_->reduce_scatter(output, input, sum), "reduce-scatter", x.device());
    return output[0];
  }
  // Gloo has no reduce-scatter of its own: the full sum, of which this rank keeps its
  // rows (twice the traffic of a ring reduce-scatter; the CPU runs are for correctness).
  std::vector<at::Tensor> tensors{x.contiguous().clone()};
  c10d::AllreduceOptions sum;
  sum.reduceOp = c10d::ReduceOp::SUM;
  wait(group_->allreduce(tensors, sum), "reduce-scatter (all-reduce)", x.device());
  return tensors[0].narrow(0, rank_ * rows, rows).contiguous();
}

void TensorParallelGroup::all_reduce(at::Tensor& x, c10d::ReduceOp::RedOpType op) {
  if (size_ == 1) return;
  if (!x.is_contiguous()) throw std::logic_error("TensorParallelGroup::all_reduce: the tensor must be contiguous");
  ScopedInterval timed(intervals_, x.device());
  std::vector<at::Tensor> tensors{x};
  c10d::AllreduceOptions options;
  options.reduceOp = op;
  wait(group_->allreduce(tensors, options), "all-reduce", x.device());
}

std::vector<TensorParallelGroup::Interval> TensorParallelGroup::take_intervals() { return std::exchange(intervals_, {}); }

std::function<void(std::vector<double>&)> tensor_parallel_vector_reduce(std::shared_ptr<TensorParallelGroup> group,
                                                                        c10::Device device,
                                                                        c10d::ReduceOp::RedOpType op) {
  return [group = std::move(group), device, op](std::vector<double>& values) {
    at::Tensor reduced = at::tensor(values, at::kDouble).to(device);
    group->all_reduce(reduced, op);
    reduced = reduced.cpu();
    std::copy(reduced.data_ptr<double>(), reduced.data_ptr<double>() + reduced.numel(), values.begin());
  };
}

}  // namespace sb
