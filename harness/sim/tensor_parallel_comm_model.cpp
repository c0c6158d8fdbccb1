#include "harness/sim/tensor_parallel_comm_model.h"

namespace sb {
namespace {

// `calls` all-gathers (or ring reduce-scatters) of `bytes`, the whole tensor, over n ranks.
CollectiveTraffic all_gathers(int64_t n, double bytes, double calls) {
  const auto ranks = static_cast<double>(n);
  return {calls * (ranks - 1.0) / ranks * bytes, calls * (ranks - 1.0), calls};
}

// `calls` ring all-reduces of `bytes` over n ranks: a reduce-scatter and an all-gather each.
CollectiveTraffic all_reduces(int64_t n, double bytes, double calls) {
  CollectiveTraffic t = all_gathers(n, bytes, 2.0 * calls);
  t.calls = calls;
  return t;
}

// `calls` reduce-scatters: over Gloo the trainer's all-reduces.
CollectiveTraffic reduce_scatters(int64_t n, double bytes, double calls, bool gloo) {
  return gloo ? all_reduces(n, bytes, calls) : all_gathers(n, bytes, calls);
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
  // Per layer 2 all-gathers and 2 reduce-scatters each way; a checkpointed layer's forward
  // ones again in the backward, with the attention's sums.
  const double recompute = !forward && stage.activation_checkpointing ? 2.0 : 1.0;
  const auto layers = static_cast<double>(stage.layers);
  traffic += all_gathers(stage.tp, stream, 2.0 * layers * recompute);
  traffic += reduce_scatters(stage.tp, stream, 2.0 * layers * recompute, stage.gloo);
  if (forward || stage.activation_checkpointing) {
    traffic += all_reduces(stage.tp, 0.0, layers * stage.attention_sums_per_layer);
  }
  // The embedding's reduce-scatter (backward: an all-gather); the head's all-gather
  // (backward: a reduce-scatter).
  if (stage.first_stage) {
    traffic += forward ? reduce_scatters(stage.tp, stream, 1.0, stage.gloo) : all_gathers(stage.tp, stream, 1.0);
  }
  if (stage.last_stage) {
    traffic += forward ? all_gathers(stage.tp, stream, 1.0) : reduce_scatters(stage.tp, stream, 1.0, stage.gloo);
    if (forward) {
      // The loss's all-reduces of [T] maxima and [2, T] sums.
      const double row = static_cast<double>(tokens) * stage.element_bytes;
      traffic += all_reduces(stage.tp, row, 1.0);
      traffic += all_reduces(stage.tp, 2.0 * row, 1.0);
    }
  }
  return traffic;
}

}  // namespace sb
