#pragma once
// Independent readings of a real run's timeline (one line of timeline_events.jsonl):
// the textbook 1F1B order each stage must have followed, and the bubble fraction that
// the measured forward/backward durations alone force (dependencies: F(s, j) after
// F(s-1, j), B(s, j) after B(s+1, j), each stage one operation at a time in 1F1B
// order, communication free). Written from the definition, not from the runtime's
// schedule code.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <utility>
#include <vector>

namespace sb::test {

// ('F' | 'B', micro-batch) in 1F1B order for stage s of p with m micro-batches.
std::vector<std::pair<char, int64_t>> textbook_one_f_one_b(int64_t s, int64_t p, int64_t m);

// Expects every rank's forward/backward events to follow textbook_one_f_one_b.
// counts[d]: micro-batches of DP rank d.
void expect_one_f_one_b_order(const nlohmann::json& timeline_line, int64_t pp, const std::vector<int64_t>& counts);

// Mean over ranks of (makespan - busy) / makespan of the dependency-only replay.
double replayed_bubble_fraction(const nlohmann::json& timeline_line, int64_t pp, const std::vector<int64_t>& counts);

// Micro-batches per DP rank from a record's microbatch_dp_rank.
std::vector<int64_t> microbatch_counts(const nlohmann::json& record, int64_t dp);

}  // namespace sb::test
