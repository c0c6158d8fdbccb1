#include "harness/trace/timeline.h"

#include <stdexcept>

#include "harness/common/jsonl_file.h"

namespace sb {
namespace {

struct KindName {
  EventKind kind;
  const char* name;
};

constexpr KindName kKindNames[] = {
    {EventKind::kData, "data"},           {EventKind::kPlan, "plan"},
    {EventKind::kForward, "forward"},     {EventKind::kBackward, "backward"},
    {EventKind::kRecvWait, "recv_wait"},  {EventKind::kSendWait, "send_wait"},
    {EventKind::kAllReduce, "allreduce"}, {EventKind::kOptimizer, "optimizer"},
    {EventKind::kPlanExchange, "plan_exchange"},
    {EventKind::kRingCompute, "ring_compute"}, {EventKind::kRingWait, "ring_wait"},
    {EventKind::kTensorParallel, "tp_comm"},
};

}  // namespace

std::string event_kind_name(EventKind kind) {
  for (const KindName& k : kKindNames) {
    if (k.kind == kind) return k.name;
  }
  throw std::logic_error("event_kind_name: unhandled EventKind");
}

EventKind event_kind_from_name(const std::string& name) {
  for (const KindName& k : kKindNames) {
    if (name == k.name) return k.kind;
  }
  throw std::invalid_argument("unknown timeline event kind \"" + name + "\"");
}

nlohmann::json rank_timeline_to_json(const RankTimeline& t) {
  // Events as compact [kind, micro-batch, start, end] rows: a long run has many.
  nlohmann::json events = nlohmann::json::array();
  for (const TimelineEvent& e : t.events) {
    events.push_back({event_kind_name(e.kind), e.microbatch, e.start_ms, e.end_ms});
  }
  return {{"rank", t.rank},         {"dp_rank", t.dp_rank}, {"stage", t.stage},
          {"start_ms", t.start_ms}, {"end_ms", t.end_ms},   {"events", events}};
}

RankTimeline rank_timeline_from_json(const nlohmann::json& j) {
  RankTimeline t;
  t.rank = j.at("rank").get<int64_t>();
  t.dp_rank = j.at("dp_rank").get<int64_t>();
  t.stage = j.at("stage").get<int64_t>();
  t.start_ms = j.at("start_ms").get<double>();
  t.end_ms = j.at("end_ms").get<double>();
  for (const auto& row : j.at("events")) {
    t.events.push_back({event_kind_from_name(row.at(0).get<std::string>()), row.at(1).get<int64_t>(),
                        row.at(2).get<double>(), row.at(3).get<double>()});
  }
  return t;
}

nlohmann::json timeline_iteration_to_json(const TimelineIteration& it) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankTimeline& r : it.ranks) ranks.push_back(rank_timeline_to_json(r));
  return {{"iteration", it.iteration}, {"origin_unix_ms", it.origin_unix_ms}, {"ranks", ranks}};
}

TimelineIteration timeline_iteration_from_json(const nlohmann::json& j) {
  TimelineIteration it;
  it.iteration = j.at("iteration").get<int64_t>();
  it.origin_unix_ms = j.at("origin_unix_ms").get<double>();
  for (const auto& r : j.at("ranks")) it.ranks.push_back(rank_timeline_from_json(r));
  return it;
}

double CommonClock::local_now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TimelineRecorder::TimelineRecorder(CommonClock clock, int64_t rank, int64_t dp_rank, int64_t stage)
    : clock_(clock) {
  current_.rank = rank;
  current_.dp_rank = dp_rank;
  current_.stage = stage;
}

void TimelineRecorder::begin_iteration() {
  current_.events.clear();
  current_.start_ms = now_ms();
  current_.end_ms = current_.start_ms;
}

void TimelineRecorder::record(EventKind kind, int64_t microbatch, double start_ms, double end_ms) {
  current_.events.push_back({kind, microbatch, start_ms, end_ms});
}

RankTimeline TimelineRecorder::end_iteration() {
  current_.end_ms = now_ms();
  RankTimeline done = current_;
  current_.events.clear();
  return done;
}

std::vector<TimelineIteration> read_timeline_events(const std::filesystem::path& file) {
  std::vector<TimelineIteration> iterations;
  for_each_jsonl_value(file, "a timeline line", [&](const nlohmann::json& j) {
    iterations.push_back(timeline_iteration_from_json(j));
  });
  return iterations;
}

}  // namespace sb
