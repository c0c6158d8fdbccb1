#include "harness/dist/pipeline_engine.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#ifdef SB_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <stdexcept>

namespace sb {
namespace {

// What a micro-batch holds between its forward and its backward on this stage.
struct InFlight {
  at::Tensor input;          // received activation (requires grad); undefined on the first stage
  at::Tensor output;         // hidden states, or the scaled loss on the last stage
  at::Tensor input_grad;     // after backward: the gradient to send back
  at::Tensor received_grad;  // gradient of `output` from the next stage
};

void synchronize(const c10::Device& device) {
#ifdef SB_WITH_CUDA
  if (device.is_cuda()) c10::cuda::device_synchronize();
#else
  (void)device;
#endif
}

}  // namespace

PipelineIterationResult run_one_f_one_b(PipelineStage& stage, PipelineChannel* channel,
                                        const std::vector<StageMicroBatch>& microbatches,
                                        double loss_divisor, TimelineRecorder& timeline) {
  const auto m = static_cast<int64_t>(microbatches.size());
  PipelineIterationResult result;
  result.layer_stats.resize(static_cast<size_t>(m));
  std::vector<InFlight> state(static_cast<size_t>(m));
  const at::ScalarType hidden_dtype = stage.parameters().front().tensor.scalar_type();
  const auto hidden_options = at::TensorOptions().dtype(hidden_dtype).device(stage.device());
  const int64_t hidden = stage.config().hidden_size;

  for (const PipelineStep& step : one_f_one_b_schedule(stage.stage(), stage.stages(), m)) {
    switch (step.kind) {
      case StepKind::kForward: {
        const auto i = static_cast<size_t>(step.microbatch);
        const StageMicroBatch& mb = microbatches[i];
        InFlight& s = state[i];
        const double start = timeline.now_ms();
        stage.backend().set_budget_request(mb.budget);
        at::Tensor input = mb.packed.tokens;
        if (!stage.is_first()) input = s.input.requires_grad_(true);
        at::Tensor out = stage.forward(input, mb.packed.position_ids, mb.packed.sequences);
        if (stage.is_last()) {
          at::Tensor summed = at::cross_entropy_loss(out, mb.packed.labels, /*weight=*/{},
                                                     at::Reduction::Sum, kIgnoreLabel);
          result.loss_sum += summed.item<double>();
          s.output = summed / loss_divisor;
        } else {
          s.output = out;
        }
        result.layer_stats[i] = stage.backend().take_layer_stats();
        synchronize(stage.device());
        timeline.record(EventKind::kForward, step.microbatch, start, timeline.now_ms());
        break;
      }
      case StepKind::kBackward: {
        const auto i = static_cast<size_t>(step.microbatch);
        InFlight& s = state[i];
        const double start = timeline.now_ms();
        if (stage.is_last()) {
          s.output.backward();
        } else {
          torch::autograd::backward({s.output}, {s.received_grad});
        }
        if (!stage.is_first()) s.input_grad = s.input.grad();
        s.output = at::Tensor();
        s.received_grad = at::Tensor();
        s.input = at::Tensor();
        synchronize(stage.device());
        timeline.record(EventKind::kBackward, step.microbatch, start, timeline.now_ms());
        break;
      }
      case StepKind::kExchange: {
        if (channel == nullptr) throw std::logic_error("run_one_f_one_b: an exchange without a channel");
        std::vector<Transfer> transfers;
        int64_t first_receive = -1;
        for (const CommOp& op : step.ops) {
          InFlight& s = state[static_cast<size_t>(op.microbatch)];
          const int64_t tokens = microbatches[static_cast<size_t>(op.microbatch)].packed.sequences.total_tokens();
          switch (op.kind) {
            case CommKind::kSendActivation:
              transfers.push_back({op, s.output.detach().contiguous()});
              break;
            case CommKind::kSendGradient:
              transfers.push_back({op, s.input_grad.contiguous()});
              s.input_grad = at::Tensor();
              break;
            case CommKind::kRecvActivation:
              s.input = at::empty({tokens, hidden}, hidden_options);  // [T, H]
              transfers.push_back({op, s.input});
              if (first_receive < 0) first_receive = op.microbatch;
              break;
            case CommKind::kRecvGradient:
              s.received_grad = at::empty({tokens, hidden}, hidden_options);  // [T, H]
              transfers.push_back({op, s.received_grad});
              if (first_receive < 0) first_receive = op.microbatch;
              break;
          }
        }
        const double start = timeline.now_ms();
        channel->exchange(transfers);
        if (first_receive >= 0) timeline.record(EventKind::kRecvWait, first_receive, start, timeline.now_ms());
        break;
      }
    }
  }
  if (channel != nullptr) {
    const double start = timeline.now_ms();
    channel->finish_sends();
    timeline.record(EventKind::kSendWait, -1, start, timeline.now_ms());
  }
  return result;
}

}  // namespace sb
