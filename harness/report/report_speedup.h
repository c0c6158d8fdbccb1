#pragma once
// Speedup of each run over its baseline run, one definition:
//   speedup = median iter_ms of the baseline run / median iter_ms of the run
// The baseline run is the run whose context experiment.method is this run's
// experiment.baseline and whose sweep point agrees with this run's on every axis that
// does not start with "methods." (same seed, same data, ...): the method's own axes
// (methods.dst.anchor, methods.dst.p) do not apply to the baseline. A baseline run
// matches itself (speedup 1). speedup stays null, with speedup_note saying why, when
// there is no such run, when it is incomplete, or when either has no measured iteration.
// With the speedup comes its 95 % interval (speedup_interval.h; [1, 1] for the baseline).

#include <vector>

#include "harness/report/run_summary.h"

namespace sb {

// Whether two sweep points agree on every axis outside "methods.*" (an axis present in
// one and absent in the other disagrees).
bool same_non_method_point(const nlohmann::json& a, const nlohmann::json& b);

void attach_speedups(std::vector<RunSummary>& runs);

}  // namespace sb
