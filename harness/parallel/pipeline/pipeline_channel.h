#pragma once
// Activations and activation gradients between neighbouring stages of one pipeline,
// over its process group (group rank = stage). Each message is one tensor [T, H]
// whose T both ends know from the batch plan, so nothing but the data travels.
// Messages on a link go in micro-batch order; the Gloo tag is 2 * micro-batch (+1 for
// gradients), so a mismatch would time out rather than deliver the wrong tensor.

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "harness/parallel/pipeline/pipeline_schedule.h"

namespace sb {

struct Transfer {
  CommOp op;
  at::Tensor tensor;  // sends: the data (kept alive until sent); receives: filled in place
};

class PipelineChannel {
 public:
  // describe(stage): "rank 5 (dp 1, stage 1)", for error messages.
  PipelineChannel(c10::intrusive_ptr<c10d::Backend> group, int64_t stage,
                  std::chrono::milliseconds timeout, std::function<std::string(int64_t)> describe);

  // Posts every transfer together (one NCCL group; Gloo posts them in order) and
  // returns when the receives have landed, for the host and the compute stream alike
  // (wait_until_usable: the time in here is the wait); sends may still be in flight
  // (in an NCCL group they complete with it). A failure or timeout throws
  // std::runtime_error naming both ranks and the message.
  void exchange(std::vector<Transfer>& transfers);
  // Waits until every send posted so far has completed.
  void finish_sends();

 private:
  [[noreturn]] void fail(const Transfer& t, const std::exception& e) const;

  c10::intrusive_ptr<c10d::Backend> group_;
  int64_t stage_;
  std::chrono::milliseconds timeout_;
  std::function<std::string(int64_t)> describe_;
  std::vector<std::pair<Transfer, c10::intrusive_ptr<c10d::Work>>> pending_sends_;
};

}  // namespace sb
