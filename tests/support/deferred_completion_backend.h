#pragma once
// A process group that completes as NCCL's may, on CPU ranks. Every call goes to an
// inner backend (Gloo); wait() on the returned work does not block the host (NCCL's
// makes the current stream wait for the collective and need not block) but queues the inner work on
// an emulated stream, which wait_for_device_work(CPU) completes, in the order queued
// (kernels/attention/core/device_completion.h). Code that reads a clock after wait()
// without completing the device work first measures ~0 as wait and counts the
// message's late arrival in the next compute interval, as it would under NCCL.
//
// `coalesce`: the group supports coalescing as NCCL's does (the pipeline's exchanges and
// the ring's send/receive pairs then take NCCL's path: one work for the whole group,
// its sends included).
//
// `delay` stands for a slow peer: the host sleeps that long before posting each call
// of the kinds in `delayed` ("send", "recv", "allreduce", "allgather", "reduce_scatter",
// "broadcast").

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <chrono>
#include <set>
#include <string>
#include <vector>

namespace sb::test {

class DeferredCompletionBackend : public c10d::Backend {
 public:
  DeferredCompletionBackend(c10::intrusive_ptr<c10d::Backend> inner, std::chrono::milliseconds delay = {},
                            std::set<std::string> delayed = {}, bool coalesce = false);

  // Makes wait_for_device_work on the CPU complete the emulated stream's queue
  // (process-wide; call once before training).
  static void install_emulated_stream();

  const std::string getBackendName() const override { return "deferred (" + inner_->getBackendName() + ")"; }
  void setTimeout(std::chrono::milliseconds timeout) override { inner_->setTimeout(timeout); }
  bool supportsCoalescing() const override { return coalesce_; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;

 private:
  void slow_peer(const char* kind) const;
  c10::intrusive_ptr<c10d::Work> deferred(c10::intrusive_ptr<c10d::Work> inner);

  c10::intrusive_ptr<c10d::Backend> inner_;
  std::chrono::milliseconds delay_;
  std::set<std::string> delayed_;
  bool coalesce_ = false;
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<c10d::Work>> group_;  // inner works posted since startCoalescing
};

}  // namespace sb::test
