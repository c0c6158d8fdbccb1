#include "harness/parallel/pipeline/pipeline_schedule.h"

#include <algorithm>
#include <stdexcept>

namespace sb {
namespace {

class ScheduleBuilder {
 public:
  ScheduleBuilder(int64_t stage, int64_t stages) : first_(stage == 0), last_(stage == stages - 1) {}

  void forward(int64_t mb) { steps_.push_back({StepKind::kForward, mb, {}}); }
  void backward(int64_t mb) { steps_.push_back({StepKind::kBackward, mb, {}}); }

  // Drops the operations that have no peer at a pipeline edge.
  void exchange(std::initializer_list<CommOp> ops) {
    PipelineStep step{StepKind::kExchange, -1, {}};
    for (const CommOp& op : ops) {
      const bool to_previous = op.kind == CommKind::kRecvActivation || op.kind == CommKind::kSendGradient;
      if (to_previous ? first_ : last_) continue;
      step.ops.push_back(op);
    }
    if (!step.ops.empty()) steps_.push_back(std::move(step));
  }

  std::vector<PipelineStep> take() { return std::move(steps_); }

 private:
  bool first_, last_;
  std::vector<PipelineStep> steps_;
};

}  // namespace

int64_t one_f_one_b_warmup(int64_t stage, int64_t stages, int64_t microbatches) {
  return std::min(stages - stage - 1, microbatches);
}

std::vector<PipelineStep> one_f_one_b_schedule(int64_t stage, int64_t stages, int64_t microbatches) {
  if (stages < 1 || stage < 0 || stage >= stages || microbatches < 0) {
    throw std::invalid_argument("1F1B schedule: need 0 <= stage < stages and microbatches >= 0");
  }
  const int64_t warmup = one_f_one_b_warmup(stage, stages, microbatches);
  const int64_t steady = microbatches - warmup;
  ScheduleBuilder b(stage, stages);
  using K = CommKind;
  for (int64_t i = 0; i < warmup; ++i) {
    b.exchange({{K::kRecvActivation, i}});
    b.forward(i);
    b.exchange({{K::kSendActivation, i}});
  }
  if (steady > 0) b.exchange({{K::kRecvActivation, warmup}});
  for (int64_t j = 0; j < steady; ++j) {
    const int64_t fwd = warmup + j;
    b.forward(fwd);
    b.exchange({{K::kSendActivation, fwd}, {K::kRecvGradient, j}});
    b.backward(j);
    if (j + 1 == steady) {
      b.exchange({{K::kSendGradient, j}});
    } else {
      b.exchange({{K::kSendGradient, j}, {K::kRecvActivation, fwd + 1}});
    }
  }
  for (int64_t i = 0; i < warmup; ++i) {
    const int64_t bwd = steady + i;
    b.exchange({{K::kRecvGradient, bwd}});
    b.backward(bwd);
    b.exchange({{K::kSendGradient, bwd}});
  }
  return b.take();
}

int64_t comm_peer_stage(int64_t stage, CommKind kind) {
  switch (kind) {
    case CommKind::kRecvActivation:
    case CommKind::kSendGradient:
      return stage - 1;
    case CommKind::kSendActivation:
    case CommKind::kRecvGradient:
      return stage + 1;
  }
  throw std::logic_error("comm_peer_stage: unhandled CommKind");
}

CommKind comm_counterpart(CommKind kind) {
  switch (kind) {
    case CommKind::kRecvActivation:
      return CommKind::kSendActivation;
    case CommKind::kSendActivation:
      return CommKind::kRecvActivation;
    case CommKind::kRecvGradient:
      return CommKind::kSendGradient;
    case CommKind::kSendGradient:
      return CommKind::kRecvGradient;
  }
  throw std::logic_error("comm_counterpart: unhandled CommKind");
}

std::string comm_kind_name(CommKind kind) {
  switch (kind) {
    case CommKind::kRecvActivation:
      return "recv activation";
    case CommKind::kSendActivation:
      return "send activation";
    case CommKind::kRecvGradient:
      return "recv gradient";
    case CommKind::kSendGradient:
      return "send gradient";
  }
  throw std::logic_error("comm_kind_name: unhandled CommKind");
}

std::string describe_step(const PipelineStep& step) {
  switch (step.kind) {
    case StepKind::kForward:
      return "F" + std::to_string(step.microbatch);
    case StepKind::kBackward:
      return "B" + std::to_string(step.microbatch);
    case StepKind::kExchange: {
      std::string text = "X{";
      for (size_t i = 0; i < step.ops.size(); ++i) {
        text += (i ? ", " : "") + comm_kind_name(step.ops[i].kind) + " " +
                std::to_string(step.ops[i].microbatch);
      }
      return text + "}";
    }
  }
  throw std::logic_error("describe_step: unhandled StepKind");
}

}  // namespace sb
