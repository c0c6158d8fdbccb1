#include "harness/sim/tensor_parallel_comm_model.h"

namespace sb {
namespace {

// `count` all-gathers or reduce-scatters of `bytes` (the whole tensor) over n ranks.
CollectiveTraffic gathers(int64_t n, double bytes, double count) {
  const auto ranks = static_cast<double>(n);
  return {count * (ranks - 1.0) / ranks * bytes, count * (ranks - 1.0)};
}

}  // namespace

double CollectiveTraffic::ms(const LinkSection& link) const {
  return latency_hops * link.alpha_us / 1000.0 + payload_bytes * 8.0 / (link.bandwidth_gbps * 1e9) * 1000.0;
}

CollectiveTraffic tensor_parallel_traffic(const TensorParallelStage& stage, int64_t tokens, bool forward) {
  CollectiveTraffic traffic;
  if (stage.tp <= 1) return traffic;
  const int64_t padded = (tokens + stage.tp - 1) / stage.tp * stage.tp;  // rows tp x ceil(T / tp)
  const double stream = static_cast<double>(padded * stage.hidden) * stage.element_bytes;  // [T, H]
  // Per layer 2 all-gathers and 2 reduce-scatters; a checkpointed layer's again in the backward.
  double per_layer = 4.0 * static_cast<double>(stage.layers);
  if (!forward && stage.activation_checkpointing) per_layer *= 2.0;
  traffic += gathers(stage.tp, stream, per_layer);
  if (stage.first_stage) traffic += gathers(stage.tp, stream, 1.0);  // embedding (backward: its gradient)
  if (stage.last_stage) {
    traffic += gathers(stage.tp, stream, 1.0);  // the final norm's output for the head (backward: its gradient)
    if (forward) {
      // The loss's all-reduces of [T] maxima and [2, T] sums, each a reduce-scatter and an
      // all-gather's worth.
      const double row = static_cast<double>(tokens) * stage.element_bytes;
      traffic += gathers(stage.tp, row, 2.0);
      traffic += gathers(stage.tp, 2.0 * row, 2.0);
    }
  }
  return traffic;
}

}  // namespace sb
