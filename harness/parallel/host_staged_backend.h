#pragma once
// A process group that carries device tensors over a host backend (Gloo): every tensor
// a collective or point-to-point call takes is copied into a host buffer (pinned when
// it lives on a GPU), the host backend moves the buffers, and waiting on the returned
// work copies the results back into the caller's tensors. Ranks sharing one GPU train
// this way (train.collectives "gloo", docs/distributed.md): NCCL refuses two ranks on
// one device, and Gloo's own send/recv read host memory only.
//
// What the trainer calls is covered: allreduce, broadcast, allgather,
// reduce_scatter, send, recv, barrier. Results land in the caller's tensors when
// wait() returns (not before): every caller here waits before it reads.

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <string>
#include <vector>

namespace sb {

class HostStagedBackend : public c10d::Backend {
 public:
  explicit HostStagedBackend(c10::intrusive_ptr<c10d::Backend> host_backend);

  const std::string getBackendName() const override;
  void setTimeout(std::chrono::milliseconds timeout) override { host_->setTimeout(timeout); }

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
  c10::intrusive_ptr<c10d::Backend> host_;
};

}  // namespace sb
