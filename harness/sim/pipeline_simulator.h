#pragma once
// Discrete-event simulation of one training iteration on dp pipelines of pp stages
// with the 1F1B schedule of harness/parallel/pipeline/pipeline_schedule.h (the same step lists the
// real ranks execute), producing the same per-rank timelines the real runtime records.
//
// Per (DP rank d, stage s), starting at start_ms[d] (the planner's time):
//   forward / backward of micro-batch m     takes forward_ms / backward_ms[d][s][m]
//   exchange step                            posts its sends (non-blocking), then waits for
//                                            its receives; a message of micro-batch m on
//                                            link s <-> s+1 starts when both ends posted
//                                            it and the link direction is free (rendezvous,
//                                            one message at a time per direction) and
//                                            takes transfer_ms[d][s][m] (activations
//                                            forward, their gradients back, same size);
//                                            the wait is a recv_wait event
//   after its last step                      send_wait until its sends were delivered
//   DP gradient all-reduce of stage s        starts when every DP rank's stage s is ready
//                                            and takes allreduce_ms[s]; the all-reduce
//                                            event of a rank spans its wait for the others
//                                            (as a blocking collective measures)
//   optimizer step                           optimizer_ms[s]
//   planner's observation exchange           an all-reduce of every rank: starts when the
//                                            last rank's optimizer step ends and takes
//                                            exchange_ms; each rank's plan_exchange event
//                                            spans its wait (none when exchange_ms is 0)
// World rank r = d * pp + s (one row per (DP rank, stage); TP ranks of a stage are
// identical and not listed separately).

#include <cstdint>
#include <vector>

#include "harness/trace/timeline.h"

namespace sb {

struct PipelineSimInput {
  int64_t dp = 1;
  int64_t pp = 1;
  std::vector<double> start_ms;                                  // [d]
  std::vector<std::vector<std::vector<double>>> forward_ms;      // [d][s][m]
  std::vector<std::vector<std::vector<double>>> backward_ms;     // [d][s][m]
  // [d][s][m]: one message between stage s and s + 1 (s < pp - 1), either direction.
  std::vector<std::vector<std::vector<double>>> transfer_ms;
  std::vector<double> allreduce_ms;  // [s]
  std::vector<double> optimizer_ms;  // [s]
  double exchange_ms = 0;
};

struct PipelineSimResult {
  std::vector<RankTimeline> ranks;  // [d * pp + s]
  double max_allreduce_ms = 0;      // longest all-reduce event (wait included)
};

// Throws std::invalid_argument when the input's shapes do not agree.
PipelineSimResult simulate_pipeline_iteration(const PipelineSimInput& input);

}  // namespace sb
