#pragma once
// The batch planner's options of a run's method (harness/balance/batch_planner.h), read
// from the manifest narrowed to that method: one function for the trainer and the
// simulator, so that both plan with exactly the same settings.

#include <cstdint>

#include "harness/balance/batch_planner.h"
#include "harness/config/manifest.h"

namespace sb {

// m has exactly one method (a RunSpec's manifest); dp: data-parallel ranks to plan for.
BatchPlannerOptions method_planner_options(const Manifest& m, int64_t dp);

}  // namespace sb
