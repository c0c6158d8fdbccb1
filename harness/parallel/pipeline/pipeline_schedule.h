#pragma once
// The 1F1B (one-forward-one-backward) pipeline schedule of one stage, as a list of
// steps. With p stages and m micro-batches, stage s runs
//   warm-up:    w = min(p - s - 1, m) forwards,
//   steady:     m - w pairs (forward of micro-batch w + j, backward of micro-batch j),
//   cool-down:  the last w backwards,
// so at most min(p - s, m) micro-batches hold activations at a time.
//
// Communication is explicit: an exchange step posts all its operations together (a
// batched send/recv, as NCCL groups them) and waits for its receives. Sends to the
// next stage carry activations, sends to the previous stage carry activation
// gradients, always in micro-batch order on each link, so both ends agree on what
// each message is. The order (a combined "send activation, receive gradient" after a
// steady-state forward and "send gradient, receive next activation" after a
// backward) is deadlock-free even when a send completes only once its receive is
// posted; tests/cpu/test_pipeline_schedule.cpp checks that by simulation.

#include <cstdint>
#include <string>
#include <vector>

namespace sb {

enum class CommKind {
  kRecvActivation,  // from stage - 1
  kSendActivation,  // to stage + 1
  kRecvGradient,    // from stage + 1
  kSendGradient,    // to stage - 1
};

struct CommOp {
  CommKind kind;
  int64_t microbatch = 0;
  bool operator==(const CommOp& other) const {
    return kind == other.kind && microbatch == other.microbatch;
  }
};

enum class StepKind { kForward, kBackward, kExchange };

struct PipelineStep {
  StepKind kind;
  int64_t microbatch = -1;   // kForward, kBackward
  std::vector<CommOp> ops;   // kExchange: posted together
};

// Steps of `stage` (0-based) of `stages` for `microbatches` >= 0 micro-batches.
// Exchange steps without operations (first/last stage edges) are omitted.
std::vector<PipelineStep> one_f_one_b_schedule(int64_t stage, int64_t stages, int64_t microbatches);

// Number of warm-up forwards of the stage: min(stages - stage - 1, microbatches).
int64_t one_f_one_b_warmup(int64_t stage, int64_t stages, int64_t microbatches);

// The stage a CommOp talks to, and the kind of the matching operation there.
int64_t comm_peer_stage(int64_t stage, CommKind kind);
CommKind comm_counterpart(CommKind kind);

std::string comm_kind_name(CommKind kind);  // "recv activation", ...
std::string describe_step(const PipelineStep& step);  // "F3", "B0", "X{send act 2, recv grad 0}"

}  // namespace sb
