#pragma once
// timeline.json: the Chrome trace-event format (the JSON object form), which Perfetto
// (ui.perfetto.dev) and chrome://tracing open. One process row per DP rank ("pid" =
// DP rank) and one thread row per pipeline stage ("tid" = stage), so each (DP rank,
// stage) is one row; every event is a complete event ("ph": "X", whole microseconds)
// named after its kind and micro-batch ("F 3", "B 3", "recv_wait 4", "allreduce", ...),
// with each rank's iteration as an enclosing "iteration N" event.
//
// Time axis: microseconds since the earliest rank start of the first iteration added;
// later iterations are placed by their origin_unix_ms, so a resumed run continues the
// trace of its first part.
//
// Rows [our rule]: every DP rank when an iteration has at most max_dp_ranks (64) of
// them. A larger run keeps 64 spread over the range (DP ranks i x dp / 64, i < 64) and,
// in each iteration, the DP rank that finished last (the one that set the iteration's
// time): thousands of rows open in neither viewer (at 2,048 DP ranks x 4 stages, 8
// iterations were 263 MB). timeline_events.jsonl keeps every rank; the trace's
// "otherData.rows" says which were kept.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "harness/trace/timeline.h"

namespace sb {

constexpr int64_t kTraceDataParallelRanks = 64;

// Builds the trace iteration by iteration (the run's writer adds each as it is recorded),
// holding the kept events as text.
class ChromeTrace {
 public:
  explicit ChromeTrace(int64_t max_dp_ranks = kTraceDataParallelRanks);

  void add(const TimelineIteration& iteration);
  // The whole trace as JSON text.
  std::string text() const;

 private:
  int64_t max_dp_ranks_;
  bool has_axis_ = false;
  double origin_unix_ms_ = 0;  // the first iteration's
  double first_ms_ = 0;        // its earliest rank start
  int64_t dp_ranks_ = 0;       // the most DP ranks an iteration had
  bool some_left_out_ = false;
  std::string events_;                                // complete events, comma-separated
  std::map<std::pair<int64_t, int64_t>, int64_t> rows_;  // (DP rank, stage) -> world rank
};

// The trace of these iterations, parsed (tests and tools).
nlohmann::json chrome_trace(const std::vector<TimelineIteration>& iterations,
                            int64_t max_dp_ranks = kTraceDataParallelRanks);

}  // namespace sb
