#pragma once
// The attention work of one packed micro-batch under context parallelism with MTraining's
// vertical-slash pattern, per pair of CP ranks (ring_work_model.h has dense and MoBA;
// docs/simulator.md, "Context parallelism").
//
// [our rule] Each sequence runs at the level whose mean kept keys per query are the
// sequence's (vertical_slash_pattern_model.h, VerticalSlashShape with F = sink + window
// and the spread): query i keeps all of 0 .. i while the shape gives it every key;
// otherwise the `sink` first keys, the `window` last ones (i - window + 1 .. i) and its
// extra keys between them (sink .. i - window), each key there with the same probability
// (the simulator has no scores to say which columns and offsets win). So a rank holding
// the sequence's first tokens serves every query's sinks, a query's own neighbourhood is
// mostly its own rank's, and the rest spreads over the ranks as their keys do.
//
// Counts are expectations (exact for dense rows), summed over query heads as the
// trainer's cp_kept_pairs; tokens are dealt by the real CpSharding. Work O(T x cp) for
// T tokens, memory O(T + cp^2).

#include <cstdint>
#include <vector>

#include "kernels/attention/ring/ring_work.h"
#include "kernels/attention/ring/cp_sharding.h"

namespace sb {

// lengths: the micro-batch's sequences in packing order; kept_keys: each one's kept keys
// per query; sink, window: the pattern's forced columns and offsets; spread: the shape's.
// Throws std::invalid_argument on mismatched sizes, cp < 1 or a negative sink or window.
RingWork vertical_slash_ring_work(const std::vector<int64_t>& lengths, const std::vector<int64_t>& kept_keys, int64_t cp,
                                  const CpLayout& layout, int64_t sink, int64_t window, double spread,
                                  int64_t query_heads);

}  // namespace sb
