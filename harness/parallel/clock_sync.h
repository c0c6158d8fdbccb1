#pragma once
// Puts every rank's timeline on rank 0's clock. Processes on one host read the same
// CLOCK_MONOTONIC (steady_clock), so their offset is exactly 0; that is detected by
// comparing the kernel's boot id. Across hosts the offset is estimated from barriers:
// each of 7 rounds ends a barrier, reads the clock and all-gathers the readings; the
// offset is the median of (this rank's reading - rank 0's). Its error is the spread in
// barrier exit times, tens to hundreds of microseconds on a data-centre network:
// small against the milliseconds-long events it aligns, and it affects only where
// events sit in timeline.json, never a metric (metrics use each rank's own durations).

#include <torch/csrc/distributed/c10d/Backend.hpp>

namespace sb {

// Milliseconds to subtract from this rank's steady clock to read rank 0's. Collective
// over `world` (every rank calls it). measure_anyway: estimate from barriers even on
// one host (to test the estimate against the exact answer, 0).
double estimate_clock_offset_ms(c10d::Backend& world, bool measure_anyway = false);

}  // namespace sb
