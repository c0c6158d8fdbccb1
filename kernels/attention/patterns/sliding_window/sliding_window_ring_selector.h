#pragma once
// Sliding-window attention under context parallelism (docs/sliding_window.md, "Under
// context parallelism"): each query block keeps the key blocks its window or the sinks
// reach, and the ring's band (RingBlockPattern::band_window) cuts the window's far block
// and the sinks' last block exactly, on the CPU ring. The coverage the windows are chosen
// by (sliding_window_coverage.h) reads every key of a sequence, so the CP ranks complete it
// together: the last queries of every sequence (one all-reduce), their score maxima and
// softmax denominators (two), and the kept mass by window (one); every rank then chooses
// the same windows and floor. The four all-reduces are the call's kRingSelectionStep event.

#include <string>

#include "kernels/attention/patterns/sliding_window/sliding_window_coverage.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_rule.h"
#include "kernels/attention/ring/ring_pattern_selector.h"

namespace sb {

class SlidingWindowRingSelector : public RingPatternSelector {
 public:
  explicit SlidingWindowRingSelector(SlidingWindowOptions options) : options_(options) {}
  std::string name() const override { return "sliding_window"; }
  int64_t block_size() const override { return options_.block_size; }
  RingCallPattern select(const RingSelectionInputs& in) override;

 private:
  SlidingWindowOptions options_;
};

// The coverage table of sliding_window_mass over the whole micro-batch, from this rank's
// tokens (q, k: the geometry's shard of this CP rank), the same on every rank.
SlidingWindowMass sliding_window_ring_mass(const RingSelectionInputs& in, int64_t sinks);

}  // namespace sb
