#pragma once
// The collectives of one tensor-parallel group (the TP ranks sharing a pipeline stage's
// layers), over c10d: NCCL on GPUs, Gloo on the CPU. Plain tensor operations without
// autograd; sequence_parallel_collectives.h and vocab_parallel.h build the
// differentiable pieces from them. Every wait is bounded by the job's timeout and a
// failure names this rank.
//
// The time spent inside each call (posting, transfer and waiting for the slowest peer)
// is kept, so the pipeline engine can put the TP communication of each micro-batch on
// the timeline and into the records. Each call's interval starts once the device work
// before it has finished and ends once its result is usable (wait_until_usable), so on
// a GPU it holds the collective and nothing else, at the price of two host
// synchronisations per collective (docs/metrics.md, "What each interval holds").

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace sb {

class TensorParallelGroup {
 public:
  // group: the c10d group of the tp ranks (group rank = tp rank); null only when tp = 1.
  TensorParallelGroup(c10::intrusive_ptr<c10d::Backend> group, int64_t size, int64_t rank,
                      std::chrono::milliseconds timeout, std::string who);

  int64_t size() const { return size_; }
  int64_t rank() const { return rank_; }
  // "nccl", or "gloo" (also Gloo with the tensors staged through host memory); "" at tp 1.
  std::string collectives_name() const;

  // x [L, ...] on every rank -> [size * L, ...], rank r's rows at [r L, (r + 1) L).
  at::Tensor all_gather_rows(const at::Tensor& x);
  // x [size * L, ...] on every rank -> [L, ...], the sum over ranks of rows [rank L, (rank + 1) L).
  at::Tensor reduce_scatter_rows(const at::Tensor& x);
  // Sum (or max) of x over the ranks, in place.
  void all_reduce(at::Tensor& x, c10d::ReduceOp::RedOpType op = c10d::ReduceOp::SUM);

  // The collectives since the last call (then forgotten): [start, end) on the steady
  // clock of CommonClock::local_now_ms, in call order.
  struct Interval {
    double start_ms, end_ms;
  };
  std::vector<Interval> take_intervals();

 private:
  void wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what, const c10::Device& device) const;

  c10::intrusive_ptr<c10d::Backend> group_;
  int64_t size_, rank_;
  std::chrono::milliseconds timeout_;
  std::string who_;
  std::vector<Interval> intervals_;
};

// A float64 vector reduced in place over `group`'s TP ranks by `op`, staged through
// `device` (NCCL reduces device tensors; Gloo host ones). With SUM it is the attention's
// head-shard sum (AttentionBackend::set_head_shard_sum); with MAX a profile's slowest
// samples.
std::function<void(std::vector<double>&)> tensor_parallel_vector_reduce(
    std::shared_ptr<TensorParallelGroup> group, c10::Device device, c10d::ReduceOp::RedOpType op = c10d::ReduceOp::SUM);

}  // namespace sb
