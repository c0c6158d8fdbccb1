#include "tests/support/deferred_completion_backend.h"

#include <ATen/ATen.h>

#include <deque>
#include <mutex>
#include <thread>
#include <stdexcept>
#include <utility>

#include "kernels/attention/core/device_completion.h"

namespace sb::test {
namespace {

// The emulated stream: inner works that a wait() made the "stream" depend on.
struct EmulatedStream {
  std::mutex mutex;
  std::deque<c10::intrusive_ptr<c10d::Work>> pending;

  void enqueue(c10::intrusive_ptr<c10d::Work> work) {
    const std::lock_guard<std::mutex> lock(mutex);
    pending.push_back(std::move(work));
  }
  // Blocks until every queued work has completed; a failure throws as the inner wait does.
  void complete() {
    for (;;) {
      c10::intrusive_ptr<c10d::Work> next;
      {
        const std::lock_guard<std::mutex> lock(mutex);
        if (pending.empty()) return;
        next = std::move(pending.front());
        pending.pop_front();
      }
      next->wait(std::chrono::minutes(2));
    }
  }
};

// A stream would hold back the compute that reads a result until it is complete; here
// that compute may run early (on code that does not wait as it should), so the results'
// tensors read zeros until then rather than whatever memory they were given.
void unwritten(std::vector<at::Tensor>& tensors) {
  for (at::Tensor& t : tensors) t.zero_();
}

EmulatedStream& stream() {
  static EmulatedStream s;
  return s;
}

// wait() queues the inner work and returns at once; completion comes with the stream.
class DeferredWork : public c10d::Work {
 public:
  explicit DeferredWork(c10::intrusive_ptr<c10d::Work> inner) : inner_(std::move(inner)) {}
  bool wait(std::chrono::milliseconds /*timeout*/) override {
    if (!queued_) stream().enqueue(inner_);
    queued_ = true;
    return true;
  }
  bool isCompleted() override { return inner_->isCompleted(); }
  bool isSuccess() const override { return inner_->isSuccess(); }
  std::exception_ptr exception() const override { return inner_->exception(); }
  void abort() override { inner_->abort(); }

 private:
  c10::intrusive_ptr<c10d::Work> inner_;
  bool queued_ = false;
};

// The inner works of one coalesced group, complete when all are.
class GroupWork : public c10d::Work {
 public:
  explicit GroupWork(std::vector<c10::intrusive_ptr<c10d::Work>> works) : works_(std::move(works)) {}
  bool wait(std::chrono::milliseconds timeout) override {
    for (auto& w : works_) w->wait(timeout);
    return true;
  }
  bool isCompleted() override {
    for (auto& w : works_) {
      if (!w->isCompleted()) return false;
    }
    return true;
  }

 private:
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
};

}  // namespace

DeferredCompletionBackend::DeferredCompletionBackend(c10::intrusive_ptr<c10d::Backend> inner,
                                                     std::chrono::milliseconds delay, std::set<std::string> delayed,
                                                     bool coalesce)
    : c10d::Backend(inner->getRank(), inner->getSize()),
      inner_(std::move(inner)),
      delay_(delay),
      delayed_(std::move(delayed)),
      coalesce_(coalesce) {}

void DeferredCompletionBackend::startCoalescing() {
  if (!coalesce_) throw std::logic_error("DeferredCompletionBackend: coalescing is off");
  coalescing_ = true;
  group_.clear();
}

c10::intrusive_ptr<c10d::Work> DeferredCompletionBackend::endCoalescing() {
  if (!coalescing_) throw std::logic_error("DeferredCompletionBackend: endCoalescing without startCoalescing");
  coalescing_ = false;
  return c10::make_intrusive<DeferredWork>(c10::make_intrusive<GroupWork>(std::exchange(group_, {})));
}

void DeferredCompletionBackend::install_emulated_stream() {
  set_host_work_completion([] { stream().complete(); });
}

void DeferredCompletionBackend::slow_peer(const char* kind) const {
  if (delay_.count() > 0 && delayed_.count(kind)) std::this_thread::sleep_for(delay_);
}

c10::intrusive_ptr<c10d::Work> DeferredCompletionBackend::deferred(c10::intrusive_ptr<c10d::Work> inner) {
  // Inside a coalesced group the call's own work is the group's (as NCCL's, whose
  // individual works are not waited).
  if (coalescing_) group_.push_back(inner);
  return c10::make_intrusive<DeferredWork>(std::move(inner));
}

c10::intrusive_ptr<c10d::Work> DeferredCompletionBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                                    const c10d::BroadcastOptions& opts) {
  slow_peer("broadcast");
  return deferred(inner_->broadcast(tensors, opts));
}

c10::intrusive_ptr<c10d::Work> DeferredCompletionBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                                    const c10d::AllreduceOptions& opts) {
  slow_peer("allreduce");
  return deferred(inner_->allreduce(tensors, opts));
}

c10::intrusive_ptr<c10d::Work> DeferredCompletionBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                                    std::vector<at::Tensor>& inputs,
                                                                    const c10d::AllgatherOptions& opts) {
  slow_peer("allgather");
  for (auto& list : outputs) unwritten(list);
  return deferred(inner_->allgather(outputs, inputs, opts));
}

c10::intrusive_ptr<c10d::Work> DeferredCompletionBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  slow_peer("reduce_scatter");
  unwritten(outputs);
  return deferred(inner_->reduce_scatter(outputs, inputs, opts));
}

c10::intrusive_ptr<c10d::Work> DeferredCompletionBackend::send(std::vector<at::Tensor>& tensors, int dst_rank,
                                                               int tag) {
  slow_peer("send");
  return deferred(inner_->send(tensors, dst_rank, tag));
}

c10::intrusive_ptr<c10d::Work> DeferredCompletionBackend::recv(std::vector<at::Tensor>& tensors, int src_rank,
                                                               int tag) {
  slow_peer("recv");
  unwritten(tensors);
  return deferred(inner_->recv(tensors, src_rank, tag));
}

c10::intrusive_ptr<c10d::Work> DeferredCompletionBackend::barrier(const c10d::BarrierOptions& opts) {
  return inner_->barrier(opts);  // a barrier blocks the host on every backend this project uses
}

}  // namespace sb::test
