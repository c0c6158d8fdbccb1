#include "harness/trace/chrome_trace.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <stdexcept>

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
    case EventKind::kPlanExchange:
      return event_kind_name(e.kind);
  }
  throw std::logic_error("event_name: unhandled EventKind");
}

void append_integer(std::string& out, int64_t value) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof(digits), value).ptr;
  out.append(digits, end);
}

// Microseconds with sub-microsecond digits dropped: traces stay small and exact enough.
int64_t whole_us(double ms) { return static_cast<int64_t>(ms * 1000.0); }

// One complete event. Names and categories are the fixed words above: nothing to escape.
void append_complete_event(std::string& out, const std::string& name, const std::string& category, int64_t pid,
                           int64_t tid, double start_ms, double end_ms, int64_t iteration, int64_t microbatch,
                           int64_t rank) {
  if (!out.empty()) out += ",\n";
  out += "{\"name\":\"" + name + "\",\"cat\":\"" + category + "\",\"ph\":\"X\",\"pid\":";
  append_integer(out, pid);
  out += ",\"tid\":";
  append_integer(out, tid);
  out += ",\"ts\":";
  append_integer(out, whole_us(start_ms));
  out += ",\"dur\":";
  append_integer(out, std::max<int64_t>(0, whole_us(end_ms) - whole_us(start_ms)));
  out += ",\"args\":{\"iteration\":";
  append_integer(out, iteration);
  if (microbatch >= 0) {
    out += ",\"microbatch\":";
    append_integer(out, microbatch);
  }
  if (rank >= 0) {
    out += ",\"rank\":";
    append_integer(out, rank);
  }
  out += "}}";
}

// The DP ranks of an iteration the trace shows (the header's rule).
std::set<int64_t> kept_dp_ranks(const TimelineIteration& it, int64_t dp, int64_t max_dp_ranks) {
  std::set<int64_t> kept;
  if (dp <= max_dp_ranks) {
    for (int64_t d = 0; d < dp; ++d) kept.insert(d);
    return kept;
  }
  for (int64_t i = 0; i < max_dp_ranks; ++i) kept.insert(i * dp / max_dp_ranks);
  const auto last = std::max_element(it.ranks.begin(), it.ranks.end(), [](const RankTimeline& a, const RankTimeline& b) {
    return a.end_ms < b.end_ms;
  });
  if (last != it.ranks.end()) kept.insert(last->dp_rank);
  return kept;
}

}  // namespace

ChromeTrace::ChromeTrace(int64_t max_dp_ranks) : max_dp_ranks_(max_dp_ranks) {
  if (max_dp_ranks < 1) throw std::invalid_argument("ChromeTrace: max_dp_ranks must be at least 1");
}

void ChromeTrace::add(const TimelineIteration& it) {
  if (it.ranks.empty()) return;
  if (!has_axis_) {
    has_axis_ = true;
    origin_unix_ms_ = it.origin_unix_ms;
    first_ms_ = std::min_element(it.ranks.begin(), it.ranks.end(), [](const RankTimeline& a, const RankTimeline& b) {
                  return a.start_ms < b.start_ms;
                })->start_ms;
  }
  int64_t dp = 0;
  for (const RankTimeline& r : it.ranks) dp = std::max(dp, r.dp_rank + 1);
  dp_ranks_ = std::max(dp_ranks_, dp);
  const std::set<int64_t> kept = kept_dp_ranks(it, dp, max_dp_ranks_);
  some_left_out_ = some_left_out_ || static_cast<int64_t>(kept.size()) < dp;
  const double shift = it.origin_unix_ms - origin_unix_ms_ - first_ms_;
  const std::string iteration_name = "iteration " + std::to_string(it.iteration);
  for (const RankTimeline& r : it.ranks) {
    if (kept.count(r.dp_rank) == 0) continue;
    rows_[{r.dp_rank, r.stage}] = r.rank;
    append_complete_event(events_, iteration_name, "iteration", r.dp_rank, r.stage, shift + r.start_ms,
                          shift + r.end_ms, it.iteration, -1, r.rank);
    for (const TimelineEvent& e : r.events) {
      append_complete_event(events_, event_name(e), event_kind_name(e.kind), r.dp_rank, r.stage, shift + e.start_ms,
                            shift + e.end_ms, it.iteration, e.microbatch, -1);
    }
  }
}

std::string ChromeTrace::text() const {
  nlohmann::json metadata = nlohmann::json::array();
  for (const auto& [row, rank] : rows_) {
    metadata.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", row.first}, {"tid", 0},
                        {"args", {{"name", "DP rank " + std::to_string(row.first)}}}});
    metadata.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", row.first}, {"tid", row.second},
                        {"args", {{"name", "stage " + std::to_string(row.second) + " (rank " + std::to_string(rank) + ")"}}}});
  }
  const std::string rows =
      some_left_out_ ? std::to_string(max_dp_ranks_) + " of " + std::to_string(dp_ranks_) +
                           " DP ranks (DP rank i x " + std::to_string(dp_ranks_) + " / " +
                           std::to_string(max_dp_ranks_) +
                           ") and each iteration's last to finish; timeline_events.jsonl holds every rank"
                     : "every DP rank";
  std::string out = "{\"displayTimeUnit\":\"ms\",\"otherData\":" + nlohmann::json{{"rows", rows}}.dump() +
                    ",\"traceEvents\":[\n";
  out += events_;
  for (const nlohmann::json& m : metadata) {
    if (out.back() != '\n') out += ",\n";
    out += m.dump();
  }
  out += "\n]}\n";
  return out;
}

nlohmann::json chrome_trace(const std::vector<TimelineIteration>& iterations, int64_t max_dp_ranks) {
  ChromeTrace trace(max_dp_ranks);
  for (const TimelineIteration& it : iterations) trace.add(it);
  return nlohmann::json::parse(trace.text());
}

}  // namespace sb
