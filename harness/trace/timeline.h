#pragma once
// What one rank did during one iteration, as timed events on the job's common clock
// (milliseconds; see CommonClock). Recorded by every rank, gathered on rank 0, turned
// into the iteration's metrics (iteration_metrics.h) and into timeline.json
// (chrome_trace.h).

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace sb {

enum class EventKind {
  kData,       // the global batch's lengths; drawing and packing this rank's micro-batches
  kPlan,       // the batching policy (balance overhead)
  kForward,    // forward of one micro-batch on this stage (loss included on the last)
  kBackward,   // backward of one micro-batch on this stage
  kRecvWait,   // blocked in a pipeline exchange waiting for a receive
  kSendWait,   // waiting for sends to complete: an exchange of sends only (its micro-batch), or
               // the iteration's last sends (-1)
  kAllReduce,  // data-parallel (and tied-embedding) gradient all-reduce
  kOptimizer,  // clipping and the optimizer step (after the gradient norm's sums)
  // The all-reduce that brings the planner's observations and the loss shares to every
  // rank (harness/train/plan_observations.h), after the optimizer step; its wait for the
  // last rank to arrive included.
  kPlanExchange,
  // Context parallelism: one ring step's attention compute, and the wait for the next
  // shard after it. They lie inside the micro-batch's forward or backward event, so
  // nothing that sums busy time counts them again.
  kRingCompute,
  kRingWait,
  // Tensor parallelism: one collective of the TP group (sequence-parallel all-gather or
  // reduce-scatter, the vocabulary-parallel loss's all-reduces, the attention's head-shard
  // sums), inside the micro-batch's forward or backward event like the ring's.
  kTensorParallel,
};

std::string event_kind_name(EventKind kind);  // "forward", "recv_wait", ...
EventKind event_kind_from_name(const std::string& name);  // throws std::invalid_argument

struct TimelineEvent {
  EventKind kind;
  int64_t microbatch = -1;  // index in this rank's micro-batch list; -1 when none
  double start_ms = 0;
  double end_ms = 0;
  double duration_ms() const { return end_ms - start_ms; }
};

// One rank's iteration: from its start to the end of its optimizer step.
struct RankTimeline {
  int64_t rank = 0;
  int64_t dp_rank = 0;
  int64_t stage = 0;
  double start_ms = 0;
  double end_ms = 0;
  std::vector<TimelineEvent> events;
};

nlohmann::json rank_timeline_to_json(const RankTimeline& timeline);
RankTimeline rank_timeline_from_json(const nlohmann::json& json);

// Every rank's timeline of one iteration: one line of a run's timeline_events.jsonl.
// origin_unix_ms: the Unix time (ms) of common-clock 0 of the process set that ran it
// (a resumed run starts a new clock; this puts both parts on one time axis).
struct TimelineIteration {
  int64_t iteration = 0;
  double origin_unix_ms = 0;
  std::vector<RankTimeline> ranks;  // by world rank
};

nlohmann::json timeline_iteration_to_json(const TimelineIteration& iteration);
TimelineIteration timeline_iteration_from_json(const nlohmann::json& json);

// Every line of a timeline_events.jsonl (empty lines skipped). Throws ConfigError naming
// file:line for a line that does not parse (a run killed mid-write leaves a cut-off last
// line), std::runtime_error when the file cannot be read.
std::vector<TimelineIteration> read_timeline_events(const std::filesystem::path& file);

// Milliseconds on the job's common clock: this process's steady clock minus an offset
// that aligns it with rank 0's (0 on a single host, where every process reads the same
// CLOCK_MONOTONIC; see harness/parallel/clock_sync.h across hosts).
class CommonClock {
 public:
  explicit CommonClock(double offset_ms = 0) : offset_ms_(offset_ms) {}
  double now_ms() const { return local_now_ms() - offset_ms_; }
  static double local_now_ms();
  double offset_ms() const { return offset_ms_; }

 private:
  double offset_ms_;
};

// Collects one rank's events iteration by iteration.
class TimelineRecorder {
 public:
  TimelineRecorder(CommonClock clock, int64_t rank, int64_t dp_rank, int64_t stage);

  const CommonClock& clock() const { return clock_; }
  double now_ms() const { return clock_.now_ms(); }
  void begin_iteration();
  void record(EventKind kind, int64_t microbatch, double start_ms, double end_ms);
  // The events recorded so far in this iteration, in order.
  const std::vector<TimelineEvent>& events() const { return current_.events; }
  // Ends the iteration now and returns it; the recorder is ready for the next one.
  RankTimeline end_iteration();

 private:
  CommonClock clock_;
  RankTimeline current_;
};

}  // namespace sb
