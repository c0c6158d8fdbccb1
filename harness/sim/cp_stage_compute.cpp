#include "harness/sim/cp_stage_compute.h"


namespace sb {

CpComputeSpec cp_compute_spec(const Manifest& m, int64_t profiled_tp) {
  const Qwen2Config& c = m.model.config;
  const SimulationSection simulation = m.simulation ? *m.simulation : SimulationSection{};
  CpComputeSpec spec;
  spec.cp = m.parallelism.cp;
  spec.inner = m.parallelism.cp_inner > 0 ? m.parallelism.cp_inner : m.parallelism.cp;
  spec.layout = m.parallelism.cp_layout;
  spec.query_heads = c.num_attention_heads;
  spec.kv_heads = c.num_key_value_heads;
  spec.tp = m.parallelism.tp;
  spec.compute_scale = profiled_tp == spec.tp ? 1.0 : 1.0 / static_cast<double>(spec.tp);
  spec.head_dim = c.head_dim;
  spec.act_bytes = m.train.precision == Qwen2Precision::kFloat32 ? 4.0 : 2.0;
  spec.forward_fraction = simulation.forward_fraction;
  spec.ring_compute_factor = simulation.ring_compute.factor;
  spec.ring_step_ms_per_token = simulation.ring_compute.step_ms_per_token;
  return spec;
}

CpMicrobatch cp_microbatch(const LatencyPredictor& predictor, const CpComputeSpec& spec,
                           const AttentionSimulation& attention, const std::vector<int64_t>& lengths,
                           const std::vector<int64_t>& budgets) {
  CpMicrobatch out;
  out.work = attention.ring_work(lengths, budgets, spec.cp, spec.layout, spec.query_heads);
  std::vector<double> terms;
  for (size_t i = 0; i < lengths.size(); ++i) terms.push_back(predictor.attention_ms(lengths[i], budgets[i]));
  out.attention_ms = predictor.packed_attention_ms(terms);
  return out;
}

CpStageCompute cp_stage_compute(const LatencyPredictor& predictor, const CpComputeSpec& spec,
                                const CpMicrobatch& microbatch, int64_t layers, int64_t stage, int64_t stages,
                                double noise) {
  CpStageCompute out;
  const RingWork& work = microbatch.work;
  const double attention = microbatch.attention_ms * spec.compute_scale;
  const double total_pairs = work.total();
  const double f = spec.forward_fraction;
  const auto W = static_cast<size_t>(spec.cp);
  const bool last = stage == stages - 1;

  RingTimingInput& t = out.timing;
  t.cp = spec.cp;
  t.inner = spec.inner;
  t.layers = layers;
  t.forward_step_ms.assign(W, std::vector<double>(W, 0.0));
  t.backward_step_ms = t.forward_step_ms;
  out.attention_unit_ms.assign(W, 0.0);
  out.step_tokens.assign(W, 0.0);
  out.other_ms.assign(W, 0.0);
  for (size_t r = 0; r < W; ++r) {
    const int64_t tokens = work.tokens[r];
    const double per_step = spec.ring_step_ms_per_token * static_cast<double>(tokens) * spec.compute_scale;
    out.step_tokens[r] = static_cast<double>(layers * spec.cp * tokens);
    for (size_t b = 0; b < W; ++b) {
      const double unit = total_pairs > 0 ? attention * work.pairs[r][b] / total_pairs : 0.0;
      out.attention_unit_ms[r] += static_cast<double>(layers) * unit;
      const double ms = (spec.ring_compute_factor * unit + per_step) * noise;
      t.forward_step_ms[r][b] = f * ms;
      t.backward_step_ms[r][b] = (1 - f) * ms;
    }
    const double scale = spec.compute_scale;
    const double rest = tokens > 0 ? scale * predictor.rest_ms(tokens) : 0.0;
    const double outside = tokens > 0 ? scale * predictor.microbatch_overhead_share_ms(tokens, stage, stages) : 0.0;
    const double head =
        last && predictor.options().include_head && tokens > 0 ? scale * predictor.head_ms(tokens) : 0.0;
    out.other_ms[r] = static_cast<double>(layers) * rest + outside + head;
    t.forward_head_ms.push_back(f * head * noise);
    t.backward_head_ms.push_back((1 - f) * head * noise);
    t.forward_rest_ms.push_back(f * rest * noise);
    t.backward_rest_ms.push_back((1 - f) * rest * noise);
    t.forward_outside_ms.push_back(f * outside * noise);
    t.backward_outside_ms.push_back((1 - f) * outside * noise);
    t.shard_bytes.push_back(static_cast<double>(tokens) * static_cast<double>(spec.kv_heads / spec.tp * spec.head_dim) *
                            2.0 * spec.act_bytes);
  }
  return out;
}

}  // namespace sb
