#pragma once
// Gradients of one stage in flat buckets, summed over the data-parallel ranks after
// the last micro-batch. Every parameter's .grad is a view into a flat buffer (one per
// bucket of about bucket_bytes, parameters in order, one dtype and device per bucket),
// so backward accumulates straight into the buffers and each bucket is all-reduced as
// one message. The sum (not the mean) is right because every micro-batch's loss is
// already divided by the global batch's token count.
//
// Tied embeddings across stages: after the DP sum, the embedding matrix's gradient is
// also summed between the first and the last stage of the pipeline (the embedding
// group), so both copies hold the gradient of the one shared weight.
//
// Tensor parallelism: each rank's data-parallel group holds the same shard of the stage
// (the same TP rank). Tensors every TP rank holds whole (StageParameter::tp_split_dim
// -1: the norms, LoRA's replicated factors) get only this rank's part of their gradient,
// so their buckets are summed over the TP group too, after the DP sum.

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "harness/parallel/pipeline/pipeline_stage.h"

namespace sb {

class GradientSync {
 public:
  // Null groups stand for groups of one rank (nothing to sum).
  GradientSync(const std::vector<StageParameter>& parameters, int64_t bucket_bytes,
               c10::intrusive_ptr<c10d::Backend> data_parallel,
               c10::intrusive_ptr<c10d::Backend> embedding, std::chrono::milliseconds timeout,
               std::string who, c10::intrusive_ptr<c10d::Backend> tensor_parallel = {});

  void zero_grads();
  // Returns when the sums are in the gradients, for the host and the compute stream
  // (wait_until_usable), so a timer around it measures the all-reduce and its wait.
  void all_reduce();

  int64_t bucket_count() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  struct Bucket {
    at::Tensor flat;        // [numel]
    bool tp_whole = false;  // its parameters are held whole by every TP rank
  };
  std::vector<Bucket> buckets_;
  at::Tensor embedding_grad_;  // view of the embedding (or tied head) gradient; undefined if none
  c10::intrusive_ptr<c10d::Backend> data_parallel_, embedding_, tensor_parallel_;
  std::chrono::milliseconds timeout_;
  std::string who_;
};

}  // namespace sb
