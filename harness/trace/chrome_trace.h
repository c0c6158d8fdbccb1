#pragma once
// timeline.json: the Chrome trace-event format (the JSON object form), which Perfetto
// (ui.perfetto.dev) and chrome://tracing open. One process row per DP rank ("pid" =
// DP rank) and one thread row per pipeline stage ("tid" = stage), so each (DP rank,
// stage) is one row; every event is a complete event ("ph": "X", microseconds) named
// after its kind and micro-batch ("F 3", "B 3", "recv_wait 4", "allreduce", ...), with
// each rank's iteration as an enclosing "iteration N" event.

#include <nlohmann/json.hpp>

#include <vector>

#include "harness/trace/timeline.h"

namespace sb {

// Times are placed on one axis: origin_unix_ms of each iteration + its event times,
// minus the earliest origin, so a resumed run continues the trace of its first part.
nlohmann::json chrome_trace(const std::vector<TimelineIteration>& iterations);

}  // namespace sb
