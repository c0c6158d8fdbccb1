#include "harness/trace/chrome_trace.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>

namespace sb {
namespace {

std::string event_name(const TimelineEvent& e) {
  switch (e.kind) {
    case EventKind::kForward:
      return "F " + std::to_string(e.microbatch);
    case EventKind::kBackward:
      return "B " + std::to_string(e.microbatch);
    case EventKind::kRecvWait:
      return e.microbatch >= 0 ? "recv_wait " + std::to_string(e.microbatch) : "recv_wait";
    case EventKind::kRingCompute:
    case EventKind::kRingWait:
    case EventKind::kTensorParallel:
      return event_kind_name(e.kind) + " " + std::to_string(e.microbatch);
    case EventKind::kData:
    case EventKind::kPlan:
    case EventKind::kSendWait:
    case EventKind::kAllReduce:
    case EventKind::kOptimizer:
      return event_kind_name(e.kind);
  }
  throw std::logic_error("event_name: unhandled EventKind");
}

nlohmann::json complete_event(const std::string& name, const std::string& category, int64_t pid,
                              int64_t tid, double start_ms, double end_ms, nlohmann::json args) {
  // Microseconds with sub-microsecond digits dropped: traces stay small and exact enough.
  const auto us = [](double ms) { return static_cast<double>(static_cast<int64_t>(ms * 1000.0)); };
  return {{"name", name}, {"cat", category}, {"ph", "X"},   {"pid", pid},
          {"tid", tid},   {"ts", us(start_ms)}, {"dur", std::max(0.0, us(end_ms) - us(start_ms))},
          {"args", std::move(args)}};
}

nlohmann::json metadata_event(const char* what, int64_t pid, int64_t tid, const std::string& name) {
  return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

}  // namespace

nlohmann::json chrome_trace(const std::vector<TimelineIteration>& iterations) {
  double origin = std::numeric_limits<double>::infinity();
  for (const auto& it : iterations) origin = std::min(origin, it.origin_unix_ms);
  // The trace starts at 0: the earliest iteration start on the common axis.
  double first = std::numeric_limits<double>::infinity();
  for (const auto& it : iterations) {
    for (const RankTimeline& r : it.ranks) first = std::min(first, it.origin_unix_ms - origin + r.start_ms);
  }
  nlohmann::json events = nlohmann::json::array();
  std::map<std::pair<int64_t, int64_t>, int64_t> rows;  // (dp rank, stage) -> world rank
  for (const TimelineIteration& it : iterations) {
    const double shift = it.origin_unix_ms - origin - first;
    for (const RankTimeline& r : it.ranks) {
      rows[{r.dp_rank, r.stage}] = r.rank;
      events.push_back(complete_event("iteration " + std::to_string(it.iteration), "iteration",
                                      r.dp_rank, r.stage, shift + r.start_ms, shift + r.end_ms,
                                      {{"iteration", it.iteration}, {"rank", r.rank}}));
      for (const TimelineEvent& e : r.events) {
        nlohmann::json args = {{"iteration", it.iteration}};
        if (e.microbatch >= 0) args["microbatch"] = e.microbatch;
        events.push_back(complete_event(event_name(e), event_kind_name(e.kind), r.dp_rank, r.stage,
                                        shift + e.start_ms, shift + e.end_ms, std::move(args)));
      }
    }
  }
  for (const auto& [row, rank] : rows) {
    events.push_back(metadata_event("process_name", row.first, 0, "DP rank " + std::to_string(row.first)));
    events.push_back(metadata_event("thread_name", row.first, row.second,
                                    "stage " + std::to_string(row.second) + " (rank " +
                                        std::to_string(rank) + ")"));
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace sb
