#include "harness/parallel/data_parallel/gradient_sync.h"

#include "harness/parallel/error_text.h"
#include "kernels/attention/core/device_completion.h"

#include <ATen/ATen.h>

#include <stdexcept>

namespace sb {

GradientSync::GradientSync(const std::vector<StageParameter>& parameters, int64_t bucket_bytes,
                           c10::intrusive_ptr<c10d::Backend> data_parallel,
                           c10::intrusive_ptr<c10d::Backend> embedding, std::chrono::milliseconds timeout,
                           std::string who, c10::intrusive_ptr<c10d::Backend> tensor_parallel)
    : data_parallel_(std::move(data_parallel)),
      embedding_(std::move(embedding)),
      tensor_parallel_(std::move(tensor_parallel)),
      timeout_(timeout),
      who_(std::move(who)) {
  if (bucket_bytes < 1) throw std::invalid_argument("GradientSync: bucket_bytes must be >= 1");
  // Under TP the tensors every TP rank holds whole (norms, LoRA factors of row-split
  // layers...) alternate with the split ones in model order; bucketing them apart, each in
  // its own pass, keeps the buckets full instead of closing one at every change.
  for (const bool whole : {false, true}) {
    std::vector<const StageParameter*> group;
    for (const StageParameter& p : parameters) {
      if ((p.tp_split_dim < 0) == whole) group.push_back(&p);
    }
    size_t begin = 0;
    while (begin < group.size()) {
      // A bucket: consecutive parameters of one dtype and device, up to bucket_bytes (a
      // larger parameter gets a bucket of its own).
      const at::TensorOptions options = group[begin]->tensor.options();
      size_t end = begin;
      int64_t numel = 0;
      while (end < group.size()) {
        const at::Tensor& t = group[end]->tensor;
        if (t.scalar_type() != options.dtype().toScalarType() || t.device() != options.device()) break;
        if (end > begin && (numel + t.numel()) * t.element_size() > bucket_bytes) break;
        numel += t.numel();
        ++end;
      }
      Bucket bucket{at::zeros({numel}, options.requires_grad(false)), whole};
      int64_t offset = 0;
      for (size_t i = begin; i < end; ++i) {
        at::Tensor param = group[i]->tensor;
        at::Tensor view = bucket.flat.narrow(0, offset, param.numel()).view(param.sizes());
        param.mutable_grad() = view;
        if (group[i]->name == "embed_tokens.weight") embedding_grad_ = view;
        offset += param.numel();
      }
      buckets_.push_back(std::move(bucket));
      begin = end;
    }
  }
  if (embedding_ && !embedding_grad_.defined()) {
    throw std::logic_error("GradientSync: an embedding group but no embedding weight on this stage");
  }
}

void GradientSync::zero_grads() {
  for (Bucket& b : buckets_) b.flat.zero_();
}

void GradientSync::all_reduce() {
  if (data_parallel_) {
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    c10d::AllreduceOptions sum;
    sum.reduceOp = c10d::ReduceOp::SUM;
    try {
      for (Bucket& b : buckets_) {
        std::vector<at::Tensor> tensors{b.flat};
        works.push_back(data_parallel_->allreduce(tensors, sum));
      }
      for (size_t i = 0; i < works.size(); ++i) wait_until_usable(works[i], timeout_, buckets_[i].flat.device());
    } catch (const std::exception& e) {
      throw std::runtime_error(who_ + ": the data-parallel gradient all-reduce failed: " + error_text(e));
    }
  }
  if (tensor_parallel_) {
    c10d::AllreduceOptions sum;
    sum.reduceOp = c10d::ReduceOp::SUM;
    try {
      std::vector<c10::intrusive_ptr<c10d::Work>> works;
      for (Bucket& b : buckets_) {
        if (!b.tp_whole) continue;
        std::vector<at::Tensor> tensors{b.flat};
        works.push_back(tensor_parallel_->allreduce(tensors, sum));
      }
      for (auto& w : works) wait_until_usable(w, timeout_, buckets_.front().flat.device());
    } catch (const std::exception& e) {
      throw std::runtime_error(who_ + ": summing the gradients of the tensors every TP rank holds whole (norms, "
                               "LoRA factors) over the tensor-parallel group failed: " + error_text(e));
    }
  }
  if (embedding_) {
    c10d::AllreduceOptions sum;
    sum.reduceOp = c10d::ReduceOp::SUM;
    std::vector<at::Tensor> tensors{embedding_grad_};
    try {
      wait_until_usable(embedding_->allreduce(tensors, sum), timeout_, embedding_grad_.device());
    } catch (const std::exception& e) {
      throw std::runtime_error(who_ + ": summing the tied embedding gradient between the first and "
                               "last stage failed: " + error_text(e));
    }
  }
}

}  // namespace sb
