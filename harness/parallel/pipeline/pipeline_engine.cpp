#include "harness/parallel/pipeline/pipeline_engine.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "kernels/attention/core/device_completion.h"

#include <stdexcept>
#include <utility>

namespace sb {
namespace {

// What a micro-batch holds between its forward and its backward on this stage.
struct InFlight {
  at::Tensor input;          // received activation (requires grad); undefined on the first stage
  at::Tensor output;         // hidden states, or the scaled loss on the last stage
  at::Tensor input_grad;     // after backward: the gradient to send back
  at::Tensor received_grad;  // gradient of `output` from the next stage
};

// One iteration's state on this stage and the three kinds of step.
class OneFOneBRun {
 public:
  OneFOneBRun(PipelineStage& stage, PipelineChannel* channel, const std::vector<StageMicroBatch>& microbatches,
              double loss_divisor, TimelineRecorder& timeline)
      : stage_(stage),
        channel_(channel),
        microbatches_(microbatches),
        loss_divisor_(loss_divisor),
        timeline_(timeline),
        state_(microbatches.size()),
        hidden_options_(at::TensorOptions()
                            .dtype(stage.parameters().front().tensor.scalar_type())
                            .device(stage.device())) {
    result_.layer_stats.resize(microbatches.size());
    if (stage_.tensor_parallel_group() != nullptr) result_.tp_comm_ms.assign(microbatches.size(), 0.0);
  }

  PipelineIterationResult run() {
    const auto m = static_cast<int64_t>(microbatches_.size());
    for (const PipelineStep& step : one_f_one_b_schedule(stage_.stage(), stage_.stages(), m)) execute(step);
    if (channel_ != nullptr) {
      const double start = timeline_.now_ms();
      channel_->finish_sends();
      timeline_.record(EventKind::kSendWait, -1, start, timeline_.now_ms());
    }
    return std::move(result_);
  }

 private:
  void execute(const PipelineStep& step) {
    switch (step.kind) {
      case StepKind::kForward:
        return forward(step.microbatch);
      case StepKind::kBackward:
        return backward(step.microbatch);
      case StepKind::kExchange:
        return exchange(step.ops);
    }
    throw std::logic_error("run_one_f_one_b: unhandled step kind");
  }

  void forward(int64_t microbatch) {
    const auto i = static_cast<size_t>(microbatch);
    const StageMicroBatch& mb = microbatches_[i];
    InFlight& s = state_[i];
    const double start = timeline_.now_ms();
    drop_tensor_parallel_comm();
    prepare_backend(mb);
    at::Tensor input = stage_.is_first() ? mb.packed.tokens : s.input.requires_grad_(true);
    at::Tensor out = stage_.forward(input, mb.packed.position_ids, mb.packed.sequences);
    if (stage_.is_last()) {
      at::Tensor summed = stage_.cross_entropy_sum(out, mb.packed.labels);
      result_.loss_sum += summed.item<double>();
      s.output = summed / loss_divisor_;
    } else {
      s.output = out;
    }
    result_.layer_stats[i] = stage_.backend().take_layer_stats();
    wait_for_device_work(stage_.device());
    timeline_.record(EventKind::kForward, microbatch, start, timeline_.now_ms());
    record_tensor_parallel_comm(microbatch);
  }

  // A forward or backward reports the TP collectives timed since it started: what ran
  // between micro-batches (the gradient norm's sum, a checkpoint's gathers) is no
  // micro-batch's communication.
  void drop_tensor_parallel_comm() {
    if (TensorParallelGroup* group = stage_.tensor_parallel_group()) group->take_intervals();
  }

  // The TP collectives of the micro-batch's forward or backward just run: timeline
  // events, and their summed time.
  void record_tensor_parallel_comm(int64_t microbatch) {
    TensorParallelGroup* group = stage_.tensor_parallel_group();
    if (group == nullptr) return;
    const double offset_ms = CommonClock::local_now_ms() - timeline_.now_ms();  // steady clock -> timeline
    for (const TensorParallelGroup::Interval& c : group->take_intervals()) {
      timeline_.record(EventKind::kTensorParallel, microbatch, c.start_ms - offset_ms, c.end_ms - offset_ms);
      result_.tp_comm_ms[static_cast<size_t>(microbatch)] += c.end_ms - c.start_ms;
    }
  }

  // The micro-batch's budget and sharding, for its forward and its backward alike.
  void prepare_backend(const StageMicroBatch& mb) {
    stage_.backend().set_budget_request(mb.budget);
    stage_.backend().set_context_parallel_sharding(mb.cp_sharding);
  }

  void backward(int64_t microbatch) {
    InFlight& s = state_[static_cast<size_t>(microbatch)];
    const double start = timeline_.now_ms();
    drop_tensor_parallel_comm();
    prepare_backend(microbatches_[static_cast<size_t>(microbatch)]);
    if (stage_.is_last()) {
      s.output.backward();
    } else {
      torch::autograd::backward({s.output}, {s.received_grad});
    }
    if (!stage_.is_first()) s.input_grad = s.input.grad();
    s.output = at::Tensor();  // frees the micro-batch's activations
    s.received_grad = at::Tensor();
    s.input = at::Tensor();
    wait_for_device_work(stage_.device());
    timeline_.record(EventKind::kBackward, microbatch, start, timeline_.now_ms());
    record_tensor_parallel_comm(microbatch);
  }

  // The tensor an operation sends, or the buffer it receives into ([R, H], R from the
  // plan's T: T, or this TP rank's rows under sequence parallelism).
  at::Tensor transfer_tensor(const CommOp& op) {
    InFlight& s = state_[static_cast<size_t>(op.microbatch)];
    const int64_t tokens =
        stage_.activation_rows(microbatches_[static_cast<size_t>(op.microbatch)].packed.sequences.total_tokens());
    const int64_t hidden = stage_.config().hidden_size;
    switch (op.kind) {
      case CommKind::kSendActivation:
        return s.output.detach().contiguous();
      case CommKind::kSendGradient:
        return std::exchange(s.input_grad, at::Tensor()).contiguous();
      case CommKind::kRecvActivation:
        return s.input = at::empty({tokens, hidden}, hidden_options_);
      case CommKind::kRecvGradient:
        return s.received_grad = at::empty({tokens, hidden}, hidden_options_);
    }
    throw std::logic_error("run_one_f_one_b: unhandled communication kind");
  }

  void exchange(const std::vector<CommOp>& ops) {
    if (channel_ == nullptr) throw std::logic_error("run_one_f_one_b: an exchange without a channel");
    std::vector<Transfer> transfers;
    int64_t first_receive = -1;
    for (const CommOp& op : ops) {
      transfers.push_back({op, transfer_tensor(op)});
      const bool receive = op.kind == CommKind::kRecvActivation || op.kind == CommKind::kRecvGradient;
      if (receive && first_receive < 0) first_receive = op.microbatch;
    }
    const double start = timeline_.now_ms();
    channel_->exchange(transfers);
    // An exchange with a receive is a receive wait (under NCCL its sends complete with it);
    // one of sends only is a send wait (NCCL completes them here, Gloo at finish_sends).
    if (first_receive >= 0) {
      timeline_.record(EventKind::kRecvWait, first_receive, start, timeline_.now_ms());
    } else {
      timeline_.record(EventKind::kSendWait, ops.front().microbatch, start, timeline_.now_ms());
    }
  }

  PipelineStage& stage_;
  PipelineChannel* channel_;
  const std::vector<StageMicroBatch>& microbatches_;
  double loss_divisor_;
  TimelineRecorder& timeline_;
  std::vector<InFlight> state_;
  at::TensorOptions hidden_options_;
  PipelineIterationResult result_;
};

}  // namespace

PipelineIterationResult run_one_f_one_b(PipelineStage& stage, PipelineChannel* channel,
                                        const std::vector<StageMicroBatch>& microbatches,
                                        double loss_divisor, TimelineRecorder& timeline) {
  return OneFOneBRun(stage, channel, microbatches, loss_divisor, timeline).run();
}

}  // namespace sb
