#pragma once
// What `report` checks of a run's records.jsonl before it uses them (docs/cli.md,
// "What is guaranteed"): one record per iteration, iterations 0, 1, 2, ... in order, no
// gap, no duplicate, and for a complete run the number of iterations its manifest asks
// for. A run that fails is shown with its problem and none of its numbers.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/records/iteration_record.h"

namespace sb {

// The first problem of the sequence, or empty. expected_iterations: the manifest's
// train.iterations when the run is complete (status.json), else nullopt.
std::string record_sequence_problem(const std::vector<IterationRecord>& records,
                                    std::optional<int64_t> expected_iterations);

}  // namespace sb
