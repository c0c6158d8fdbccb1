#include "harness/parallel/host_staged_backend.h"

#include <ATen/ATen.h>

#include <stdexcept>
#include <utility>

namespace sb {
namespace {

// A host buffer shaped like `t`: contiguous, pinned when t is on a GPU (the copies to
// and from it are then plain DMA). `fill`: with t's values (an input), else empty.
at::Tensor host_buffer(const at::Tensor& t, bool fill) {
  at::Tensor buffer = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(t.is_cuda()));
  if (fill) buffer.copy_(t);  // from a GPU: waits for the copy (a blocking copy_)
  return buffer;
}

std::vector<at::Tensor> host_buffers(const std::vector<at::Tensor>& tensors, bool fill) {
  std::vector<at::Tensor> buffers;
  buffers.reserve(tensors.size());
  for (const at::Tensor& t : tensors) buffers.push_back(host_buffer(t, fill));
  return buffers;
}

// The host backend's work; wait() waits for it, then copies each host result into the
// caller's tensor. The buffers stay alive with it (a send reads its buffer until done).
class StagedWork : public c10d::Work {
 public:
  StagedWork(c10::intrusive_ptr<c10d::Work> host_work, std::vector<at::Tensor> destinations,
             std::vector<at::Tensor> results, std::vector<at::Tensor> keep_alive)
      : host_work_(std::move(host_work)),
        destinations_(std::move(destinations)),
        results_(std::move(results)),
        keep_alive_(std::move(keep_alive)) {}

  bool wait(std::chrono::milliseconds timeout) override {
    host_work_->wait(timeout);  // throws on failure or timeout, as the host backend's does
    for (size_t i = 0; i < destinations_.size(); ++i) destinations_[i].copy_(results_[i]);
    destinations_.clear();
    results_.clear();
    keep_alive_.clear();
    done_ = true;
    return true;
  }
  // Complete once waited on: before that the results are not in the caller's tensors.
  bool isCompleted() override { return done_; }
  bool isSuccess() const override { return host_work_->isSuccess(); }
  std::exception_ptr exception() const override { return host_work_->exception(); }
  void abort() override { host_work_->abort(); }

 private:
  c10::intrusive_ptr<c10d::Work> host_work_;
  std::vector<at::Tensor> destinations_, results_, keep_alive_;
  bool done_ = false;
};

c10::intrusive_ptr<c10d::Work> staged(c10::intrusive_ptr<c10d::Work> work, std::vector<at::Tensor> destinations,
                                      std::vector<at::Tensor> results, std::vector<at::Tensor> keep_alive = {}) {
  return c10::make_intrusive<StagedWork>(std::move(work), std::move(destinations), std::move(results),
                                         std::move(keep_alive));
}

}  // namespace

HostStagedBackend::HostStagedBackend(c10::intrusive_ptr<c10d::Backend> host_backend)
    : c10d::Backend(host_backend ? host_backend->getRank() : 0, host_backend ? host_backend->getSize() : 0),
      host_(std::move(host_backend)) {
  if (!host_) throw std::invalid_argument("HostStagedBackend: no host backend to stage through");
}

const std::string HostStagedBackend::getBackendName() const { return host_->getBackendName() + " (host-staged)"; }

c10::intrusive_ptr<c10d::Work> HostStagedBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  std::vector<at::Tensor> buffers = host_buffers(tensors, /*fill=*/true);
  auto work = host_->broadcast(buffers, opts);
  return staged(std::move(work), tensors, buffers);
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  std::vector<at::Tensor> buffers = host_buffers(tensors, /*fill=*/true);
  auto work = host_->allreduce(buffers, opts);
  return staged(std::move(work), tensors, buffers);
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllgatherOptions& opts) {
  std::vector<at::Tensor> input_buffers = host_buffers(inputs, /*fill=*/true);
  std::vector<std::vector<at::Tensor>> output_buffers;
  std::vector<at::Tensor> destinations, results;
  for (const auto& list : outputs) {
    output_buffers.push_back(host_buffers(list, /*fill=*/false));
    destinations.insert(destinations.end(), list.begin(), list.end());
    results.insert(results.end(), output_buffers.back().begin(), output_buffers.back().end());
  }
  auto work = host_->allgather(output_buffers, input_buffers, opts);
  return staged(std::move(work), std::move(destinations), std::move(results), std::move(input_buffers));
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                 std::vector<std::vector<at::Tensor>>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) {
  std::vector<std::vector<at::Tensor>> input_buffers;
  std::vector<at::Tensor> keep_alive;
  for (const auto& list : inputs) {
    input_buffers.push_back(host_buffers(list, /*fill=*/true));
    keep_alive.insert(keep_alive.end(), input_buffers.back().begin(), input_buffers.back().end());
  }
  std::vector<at::Tensor> output_buffers = host_buffers(outputs, /*fill=*/false);
  auto work = host_->reduce_scatter(output_buffers, input_buffers, opts);
  return staged(std::move(work), outputs, output_buffers, std::move(keep_alive));
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  std::vector<at::Tensor> buffers = host_buffers(tensors, /*fill=*/true);
  auto work = host_->send(buffers, dst_rank, tag);
  return staged(std::move(work), {}, {}, std::move(buffers));
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  std::vector<at::Tensor> buffers = host_buffers(tensors, /*fill=*/false);
  auto work = host_->recv(buffers, src_rank, tag);
  return staged(std::move(work), tensors, buffers);
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::barrier(const c10d::BarrierOptions& opts) {
  return host_->barrier(opts);
}

}  // namespace sb
