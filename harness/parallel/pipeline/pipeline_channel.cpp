#include "harness/parallel/pipeline/pipeline_channel.h"

#include "harness/parallel/error_text.h"
#include "kernels/attention/core/device_completion.h"

#include <stdexcept>

namespace sb {
namespace {

bool is_send(CommKind kind) { return kind == CommKind::kSendActivation || kind == CommKind::kSendGradient; }

int tag_of(const CommOp& op) {
  const bool gradient = op.kind == CommKind::kRecvGradient || op.kind == CommKind::kSendGradient;
  return static_cast<int>(2 * op.microbatch + (gradient ? 1 : 0));
}

}  // namespace

PipelineChannel::PipelineChannel(c10::intrusive_ptr<c10d::Backend> group, int64_t stage,
                                 std::chrono::milliseconds timeout,
                                 std::function<std::string(int64_t)> describe)
    : group_(std::move(group)), stage_(stage), timeout_(timeout), describe_(std::move(describe)) {}

void PipelineChannel::fail(const Transfer& t, const std::exception& e) const {
  const int64_t peer = comm_peer_stage(stage_, t.op.kind);
  const char* what = t.op.kind == CommKind::kRecvActivation || t.op.kind == CommKind::kSendActivation
                         ? "activation" : "activation gradient";
  throw std::runtime_error(describe_(stage_) + (is_send(t.op.kind) ? " could not send the " : " could not receive the ") +
                           what + " of micro-batch " + std::to_string(t.op.microbatch) +
                           (is_send(t.op.kind) ? " to " : " from ") + describe_(peer) + ": " + error_text(e));
}

void PipelineChannel::exchange(std::vector<Transfer>& transfers) {
  if (transfers.empty()) return;
  if (!group_) throw std::logic_error("PipelineChannel: exchange without a pipeline group (pp = 1)");
  const bool grouped = group_->supportsCoalescing();
  std::vector<std::pair<size_t, c10::intrusive_ptr<c10d::Work>>> receives;
  if (grouped) group_->startCoalescing();
  for (size_t i = 0; i < transfers.size(); ++i) {
    Transfer& t = transfers[i];
    const int peer = static_cast<int>(comm_peer_stage(stage_, t.op.kind));
    std::vector<at::Tensor> tensors{t.tensor};
    try {
      if (is_send(t.op.kind)) {
        auto work = group_->send(tensors, peer, tag_of(t.op));
        if (!grouped) pending_sends_.emplace_back(t, work);
      } else {
        auto work = group_->recv(tensors, peer, tag_of(t.op));
        if (!grouped) receives.emplace_back(i, work);
      }
    } catch (const std::exception& e) {
      fail(t, e);
    }
  }
  if (grouped) {
    // NCCL: one group, sends included; usable once the compute stream has it.
    try {
      wait_until_usable(group_->endCoalescing(), timeout_, transfers.front().tensor.device());
    } catch (const std::exception& e) {
      fail(transfers.front(), e);
    }
    return;
  }
  for (auto& [index, work] : receives) {
    try {
      wait_until_usable(work, timeout_, transfers[index].tensor.device());
    } catch (const std::exception& e) {
      fail(transfers[index], e);
    }
  }
}

void PipelineChannel::finish_sends() {
  for (auto& [transfer, work] : pending_sends_) {
    try {
      wait_until_usable(work, timeout_, transfer.tensor.device());
    } catch (const std::exception& e) {
      fail(transfer, e);
    }
  }
  pending_sends_.clear();
}

}  // namespace sb
