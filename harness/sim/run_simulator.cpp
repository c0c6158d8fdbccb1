#include "harness/sim/run_simulator.h"

#include "common/errors.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "harness/data/batch_shape.h"
#include "harness/parallel/parallel_layout.h"
#include "harness/train/plan_observations.h"
#include "harness/sim/pipeline_simulator.h"
#include "harness/patterns/attention_patterns.h"
#include "harness/sim/ring_timing_model.h"
#include "harness/trace/iteration_metrics.h"
#include "harness/train/lr_schedule.h"
#include "harness/train/method_planner_options.h"
#include "models/qwen2/qwen2_config.h"

namespace sb {
namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double activation_bytes(const Manifest& m) { return m.train.precision == Qwen2Precision::kFloat32 ? 4.0 : 2.0; }

// (in, out) features of a LoRA target projection.
std::pair<double, double> projection_shape(const Qwen2Config& c, const std::string& name) {
  const auto h = static_cast<double>(c.hidden_size);
  const auto q = static_cast<double>(c.num_attention_heads * c.head_dim);
  const auto kv = static_cast<double>(c.num_key_value_heads * c.head_dim);
  const auto i = static_cast<double>(c.intermediate_size);
  if (name == "q_proj") return {h, q};
  if (name == "k_proj" || name == "v_proj") return {h, kv};
  if (name == "o_proj") return {q, h};
  if (name == "gate_proj" || name == "up_proj") return {h, i};
  if (name == "down_proj") return {i, h};
  throw std::invalid_argument("projection_shape: unknown projection \"" + name + "\"");
}

}  // namespace

std::vector<double> stage_trained_parameters(const Manifest& m) {
  const Qwen2Config& c = m.model.config;
  const auto h = static_cast<double>(c.hidden_size);
  const auto q = static_cast<double>(c.num_attention_heads * c.head_dim);
  const auto kv = static_cast<double>(c.num_key_value_heads * c.head_dim);
  const int64_t pp = m.parallelism.pp;
  std::vector<double> out(static_cast<size_t>(pp), 0.0);
  double per_layer = 0;
  if (m.train.lora) {
    for (const std::string& module : m.train.lora->target_modules) {
      const auto [in, outf] = projection_shape(c, module);
      per_layer += static_cast<double>(m.train.lora->rank) * (in + outf);
    }
  } else {
    per_layer = (h * q + q) + 2 * (h * kv + kv) + q * h + 3 * h * static_cast<double>(c.intermediate_size) + 2 * h;
  }
  const double embedding = m.train.lora ? 0.0 : static_cast<double>(c.vocab_size) * h;
  for (int64_t s = 0; s < pp; ++s) {
    out[static_cast<size_t>(s)] = per_layer * static_cast<double>(m.parallelism.stage_layers[static_cast<size_t>(s)]);
  }
  out.front() += embedding;
  if (!m.train.lora) out.back() += h;  // final norm
  // The last stage holds the lm_head, or with tied embeddings (pp > 1) a copy of the
  // embedding it trains too.
  if (!c.tie_word_embeddings || pp > 1) out.back() += embedding;
  return out;
}

TensorParallelStage tensor_parallel_stage(const Manifest& m, int64_t stage, bool floor, bool budgeted) {
  TensorParallelStage out;
  out.tp = m.parallelism.tp;
  out.layers = m.parallelism.stage_layers.at(static_cast<size_t>(stage));
  out.first_stage = stage == 0;
  out.last_stage = stage == m.parallelism.pp - 1;
  out.activation_checkpointing = m.train.activation_checkpointing;
  out.hidden = m.model.config.hidden_size;
  out.element_bytes = activation_bytes(m);
  out.gloo = !m.train.on_cuda() || m.train.collectives == TrainCollectives::kGloo;
  out.attention_sums_per_layer = m.methods.at(0).attention.pattern().tensor_parallel_sums_per_layer(floor, budgeted);
  return out;
}

TensorParallelStage tensor_parallel_stage(const Manifest& m, int64_t stage, const PlannedMicroBatch& mb) {
  return tensor_parallel_stage(m, stage, mb.coverage_floor_ratio > 0, mb.budget > 0 || !mb.sequence_budgets.empty());
}

std::vector<double> stage_dp_allreduce_bytes(const Manifest& m) {
  std::vector<double> bytes = stage_trained_parameters(m);
  for (double& b : bytes) b *= 4.0 / static_cast<double>(m.parallelism.tp);
  return bytes;
}

bool RunSimulator::profile_times_tp_collectives() const {
  const LatencyProfileTraining& training = profile_.predictor->profile().training;
  return training.tensor_parallel == manifest_.parallelism.tp && !training.tensor_parallel_collectives.empty();
}

RunSimulator::RunSimulator(const Manifest& m, SimProfile profile, ClusterSection cluster, RunSimulatorOptions options)
    : manifest_(m),
      profile_(std::move(profile)),
      cluster_(std::move(cluster), m.parallelism.dp, m.parallelism.pp, m.parallelism.tp, m.parallelism.cp),
      options_(options),
      simulation_(m.simulation ? *m.simulation : SimulationSection{}),
      noise_(simulation_.latency_noise.sigma, simulation_.latency_noise.rank_sigma, static_cast<uint64_t>(m.seed)) {
  const Qwen2Config& config = m.model.config;
  // A profile times either the whole layer (scaled by 1 / tp below) or one TP rank's share
  // measured for this tp (docs/tensor_parallel.md, "Latency profiles").
  const int64_t profiled_tp = profile_.predictor->profile().training.tensor_parallel;
  if (profiled_tp != 1 && profiled_tp != m.parallelism.tp) {
    throw ConfigError(m.file, "$.simulation.profile",
                      "was measured for tensor parallelism " + std::to_string(profiled_tp) + ", the run has tp " +
                          std::to_string(m.parallelism.tp),
                      "measure a profile for tp " + std::to_string(m.parallelism.tp) +
                          " (sparsebalance profile --tensor-parallel), or one without tensor parallelism");
  }
  if (profile_.predictor->profile().training.context_parallel > 1) {
    // The ring model (item 10 of docs/simulator.md) splits a one-rank profile's compute
    // over the CP ranks step by step; a profile of whole CP micro-batches has the split in it.
    // The profile may come from --profile, simulation.profile or the method's own (which
    // `run` measures on the CP ranks for a CP run): the fix is the same.
    throw ConfigError(m.file, "$.simulation.profile",
                      "the profile " + (profile_.file.empty() ? std::string("given") : profile_.file) +
                          " was timed on " + std::to_string(profile_.predictor->profile().training.context_parallel) +
                          " CP ranks together; the simulator's ring model needs a one-rank profile",
                      "give simulation.profile (or --profile) a profile measured without --context-parallel");
  }
  if (m.parallelism.cp > 1) cp_spec_ = cp_compute_spec(m, profiled_tp);
  dataset_ = make_dataset(m.data, m.seed, dataset_limits(m));
  planner_ = std::make_unique<BatchPlanner>(method_planner_options(m, m.parallelism.dp), profile_.predictor);
  const MethodSection& method = m.methods.at(0);
  const CoverageSection& c = simulation_.coverage;
  attention_ = attention_plugin(method.attention)
                   .simulation(method.attention.pattern(),
                               SimulationCoverage{c.model, c.exponent, c.rule_keys, c.spread, c.fit_from}, m.file);
  stage_trained_params_ = stage_trained_parameters(m);
  stage_dp_bytes_ = stage_dp_allreduce_bytes(m);
}

void RunSimulator::simulate_context_parallel_microbatch(int64_t d, const PlannedMicroBatch& mb,
                                                       const std::vector<int64_t>& lengths,
                                                       const std::vector<int64_t>& budgets, double noise,
                                                       PipelineSimInput& in, IterationRecord& record) const {
  const Manifest& m = manifest_;
  const Qwen2Config& config = m.model.config;
  const int64_t pp = m.parallelism.pp, cp = m.parallelism.cp, tp = m.parallelism.tp;
  const AttentionPattern& pattern = m.methods.at(0).attention.pattern();
  const auto W = static_cast<size_t>(cp);
  std::vector<double> tp_comm(W, 0.0);  // each CP rank's TP collectives, summed over the stages
  // Each pass runs the ring: forward, backward, and the recomputed forward under checkpointing.
  const double passes = m.train.activation_checkpointing ? 3.0 : 2.0;
  std::vector<double> attention_ms(W, 0.0), pairs(W, 0.0);
  const CpMicrobatch microbatch = cp_microbatch(*profile_.predictor, *cp_spec_, *attention_, lengths, budgets);
  const RingWork& work = microbatch.work;
  for (int64_t s = 0; s < pp; ++s) {
    const int64_t layers = m.parallelism.stage_layers[static_cast<size_t>(s)];
    CpStageCompute c = cp_stage_compute(*profile_.predictor, *cp_spec_, microbatch, layers, s, pp, noise);
    c.timing.transfer_ms = [&](int64_t from, int64_t to, double bytes) {
      return alpha_beta_ms(cluster_.context_parallel_link(d, s, from, to), bytes);
    };
    // The pattern's selection before each layer's ring: its all-reduces over the CP group
    // (this TP rank's heads).
    const std::vector<SelectionAllreduces> syncs = pattern.ring_selection_allreduces(
        lengths, mb.budget > 0 || !mb.sequence_budgets.empty(), mb.coverage_floor_ratio > 0,
        config.num_attention_heads / tp, config.num_key_value_heads / tp, config.head_dim);
    if (!syncs.empty()) {
      double sync_ms = 0;
      for (const SelectionAllreduces& sync : syncs) {
        sync_ms += sync.count * ring_allreduce_ms(cluster_.context_parallel_group_link(d, s), cp, sync.bytes);
      }
      c.timing.layer_sync_ms = sync_ms;
    }
    if (tp > 1) {
      // Each CP rank's TP collectives on its tokens: the layers' with each layer's compute
      // outside attention, the embedding's with the compute before the layers, the head's
      // and the loss's with the head (forward after the layers, backward before them).
      // A profile timed with them has them in its compute already: recorded, not added.
      const double added = profile_times_tp_collectives() ? 0.0 : 1.0;
      const LinkSection& tp_link = cluster_.tensor_parallel_link(d, s);
      const TensorParallelStage stage = tensor_parallel_stage(m, s, mb);
      TensorParallelStage one_layer = stage, embedding = stage, head = stage;
      one_layer.layers = 1;
      embedding.layers = head.layers = 0;
      one_layer.first_stage = one_layer.last_stage = head.first_stage = embedding.last_stage = false;
      const auto ms = [&](const TensorParallelStage& part, int64_t tokens, bool forward) {
        return tensor_parallel_traffic(part, tokens, forward).ms(tp_link);
      };
      for (size_t r = 0; r < W; ++r) {
        const int64_t tokens = work.tokens[r];
        const double layer[2] = {ms(one_layer, tokens, true), ms(one_layer, tokens, false)};
        const double before[2] = {ms(embedding, tokens, true), ms(embedding, tokens, false)};
        const double after[2] = {ms(head, tokens, true), ms(head, tokens, false)};
        c.timing.forward_rest_ms[r] += added * layer[0];
        c.timing.backward_rest_ms[r] += added * layer[1];
        c.timing.forward_outside_ms[r] += added * before[0];
        c.timing.backward_outside_ms[r] += added * before[1];
        c.timing.forward_head_ms[r] += added * after[0];
        c.timing.backward_head_ms[r] += added * after[1];
        tp_comm[r] += static_cast<double>(layers) * (layer[0] + layer[1]) + before[0] + before[1] + after[0] + after[1];
      }
    }
    const RingTiming t = simulate_ring_microbatch(c.timing);
    in.forward_ms[static_cast<size_t>(d)][static_cast<size_t>(s)].push_back(std::max(0.0, t.forward_ms));
    in.backward_ms[static_cast<size_t>(d)][static_cast<size_t>(s)].push_back(std::max(0.0, t.backward_ms));
    // Each CP rank sends its own tokens' activations to its peer in the next stage, side by
    // side: the slowest of them.
    double transfer = 0;
    for (int64_t r = 0; s + 1 < pp && r < cp; ++r) {
      const double bytes = static_cast<double>(work.tokens[static_cast<size_t>(r)] * config.hidden_size) *
                           activation_bytes(m);
      transfer = std::max(transfer, alpha_beta_ms(cluster_.pipeline_link(d, s, r), bytes));
    }
    in.transfer_ms[static_cast<size_t>(d)][static_cast<size_t>(s)].push_back(transfer);
    for (size_t r = 0; r < W; ++r) {
      attention_ms[r] += t.attention_ms[r];
      pairs[r] += passes * static_cast<double>(layers) * work.row(static_cast<int64_t>(r));
    }
  }
  std::vector<int64_t> kept;
  for (double p : pairs) kept.push_back(std::llround(p));
  record.cp_worker_imbalance.push_back(max_over_mean(attention_ms));
  record.cp_work_imbalance.push_back(max_over_mean(pairs));
  record.cp_attention_ms.push_back(std::move(attention_ms));
  record.cp_kept_pairs.push_back(std::move(kept));
  if (tp > 1) {  // as the trainer records it: per TP rank (all alike here), the mean over the CP ranks
    const double mean = std::accumulate(tp_comm.begin(), tp_comm.end(), 0.0) / static_cast<double>(cp);
    record.tp_comm_ms.push_back(std::vector<double>(static_cast<size_t>(tp), mean));
  }
}

SimulatedIteration RunSimulator::simulate_iteration(int64_t iteration) {
  const Manifest& m = manifest_;
  const TrainSection& train = m.train;
  const MethodSection& method = m.methods.at(0);
  const Qwen2Config& config = m.model.config;
  const LatencyPredictor& predictor = *profile_.predictor;
  const int64_t dp = m.parallelism.dp, pp = m.parallelism.pp, tp = m.parallelism.tp;

  SimulatedIteration out;
  IterationRecord& record = out.record;
  const BatchShape shape = dataset_->global_batch_shape(iteration, train.global_batch_size);
  const std::vector<int64_t>& lengths = shape.lengths;
  record.tokens = shape.tokens;
  record.loss_tokens = shape.loss_tokens;
  record.sequences = shape.sequences;

  const double plan_start = now_ms();
  out.plan = planner_->plan(lengths);
  const double measured_plan_ms = now_ms() - plan_start;
  out.plan.validate(lengths, train.max_tokens_per_microbatch);
  const double plan_ms = options_.fixed_plan_ms >= 0 ? options_.fixed_plan_ms : measured_plan_ms;

  const double sim_start = now_ms();
  const double act_bytes = activation_bytes(m);
  const auto hidden = static_cast<double>(config.hidden_size);
  const double f = simulation_.forward_fraction;
  PipelineSimInput in;
  in.dp = dp;
  in.pp = pp;
  in.start_ms.assign(static_cast<size_t>(dp), plan_ms);
  in.forward_ms.assign(static_cast<size_t>(dp), std::vector<std::vector<double>>(static_cast<size_t>(pp)));
  in.backward_ms = in.forward_ms;
  in.transfer_ms = in.forward_ms;
  const int64_t total_layers = std::accumulate(m.parallelism.stage_layers.begin(),
                                               m.parallelism.stage_layers.end(), int64_t{0});
  std::vector<std::vector<double>> realized(static_cast<size_t>(dp));
  std::vector<std::vector<double>> floors(static_cast<size_t>(dp));  // DST's floor, as the backend reports it
  // Kept-keys axis: per sample (plan position), the kept keys it ran with and its rule's.
  std::vector<double> sample_budgets, sample_references;
  if (method.attention.budget_axis() == BudgetAxis::kKeptKeys) {
    sample_budgets.assign(lengths.size(), 0.0);
    sample_references.assign(lengths.size(), 0.0);
  }
  for (int64_t d = 0; d < dp; ++d) {
    const auto& mbs = out.plan.ranks[static_cast<size_t>(d)];
    for (size_t mb_index = 0; mb_index < mbs.size(); ++mb_index) {
      const PlannedMicroBatch& mb = mbs[mb_index];
      const double noise = noise_.factor(iteration, d, static_cast<int64_t>(mb_index));
      const std::vector<int64_t> mb_lengths = microbatch_lengths(mb, lengths);
      const SimulatedAttention attention =
          attention_->micro_batch(mb, mb_lengths, total_layers, record, sample_budgets, sample_references);
      const std::vector<int64_t>& sequence_budgets = attention.sequence_budgets;
      realized[static_cast<size_t>(d)].push_back(attention.realized);
      floors[static_cast<size_t>(d)].push_back(attention.floor);
      std::vector<double> attention_terms;
      for (size_t i = 0; i < mb_lengths.size(); ++i) {
        attention_terms.push_back(predictor.attention_ms(mb_lengths[i], sequence_budgets[i]));
      }
      if (cp_spec_) {
        simulate_context_parallel_microbatch(d, mb, mb_lengths, sequence_budgets, noise, in, record);
        record.microbatch_tokens.push_back(mb.tokens);
        if (mb.predicted_ms >= 0) record.microbatch_pred_ms.push_back(mb.predicted_ms);
        continue;
      }
      const double per_layer = predictor.packed_attention_ms(attention_terms) + predictor.rest_ms(mb.tokens);
      const double tokens_bytes = static_cast<double>(mb.tokens) * hidden * act_bytes;
      double tp_comm_ms = 0.0;  // summed over the stages, as the trainer records it
      for (int64_t s = 0; s < pp; ++s) {
        const auto layers = static_cast<double>(m.parallelism.stage_layers[static_cast<size_t>(s)]);
        double compute = layers * per_layer;
        if (s == pp - 1 && predictor.options().include_head) compute += predictor.head_ms(mb.tokens);
        // The stage's share of the (signed) overhead; a stage never computes for less than 0 ms.
        compute = std::max(0.0, compute + predictor.microbatch_overhead_share_ms(mb.tokens, s, pp));
        // One TP rank's share: measured so, or the whole layer's split evenly.
        const bool share_profiled = predictor.profile().training.tensor_parallel == tp;
        compute *= noise / (share_profiled ? 1.0 : static_cast<double>(tp));
        // The stage's TP collectives (tensor_parallel_comm_model.h), per micro-batch and TP rank.
        const TensorParallelStage tp_stage = tensor_parallel_stage(m, s, mb);
        const LinkSection& tp_link = cluster_.tensor_parallel_link(d, s);
        const double tp_forward = tensor_parallel_traffic(tp_stage, mb.tokens, true).ms(tp_link);
        const double tp_backward = tensor_parallel_traffic(tp_stage, mb.tokens, false).ms(tp_link);
        tp_comm_ms += tp_forward + tp_backward;
        // A profile timed with the TP collectives has them in its compute already.
        const double added = profile_times_tp_collectives() ? 0.0 : 1.0;
        in.forward_ms[static_cast<size_t>(d)][static_cast<size_t>(s)].push_back(f * compute + added * tp_forward);
        in.backward_ms[static_cast<size_t>(d)][static_cast<size_t>(s)].push_back((1 - f) * compute +
                                                                                 added * tp_backward);
        in.transfer_ms[static_cast<size_t>(d)][static_cast<size_t>(s)].push_back(
            s + 1 < pp ? alpha_beta_ms(cluster_.pipeline_link(d, s), tokens_bytes / static_cast<double>(tp)) : 0.0);
      }
      if (tp > 1) record.tp_comm_ms.push_back(std::vector<double>(static_cast<size_t>(tp), tp_comm_ms));
      record.microbatch_tokens.push_back(mb.tokens);
      if (mb.predicted_ms >= 0) record.microbatch_pred_ms.push_back(mb.predicted_ms);
    }
  }
  // Predictions only when every micro-batch has one (as the real record).
  if (record.microbatch_pred_ms.size() != record.microbatch_tokens.size()) record.microbatch_pred_ms.clear();
  for (int64_t s = 0; s < pp; ++s) {
    const double params = stage_trained_params_[static_cast<size_t>(s)] / static_cast<double>(tp);
    in.allreduce_ms.push_back(ring_allreduce_ms(cluster_.data_parallel_link(s), cluster_.data_parallel_ranks(),
                                                stage_dp_bytes_[static_cast<size_t>(s)]));
    // Only the optimizer step, unless the measured iteration overhead (which includes it)
    // is given; the sequence inside a rank's iteration does not change its end.
    if (simulation_.iteration_overhead.ms >= 0) {
      in.optimizer_ms.push_back(simulation_.iteration_overhead.ms);
    } else {
      in.optimizer_ms.push_back(simulation_.optimizer_ms >= 0
                                    ? simulation_.optimizer_ms
                                    : params * 28.0 * 8.0 / (cluster_.cluster().memory_bandwidth_gbps * 1e9) * 1000.0);
    }
  }
  // The planner's observation exchange, the all-reduce `run` makes after the optimizer step
  // (harness/train/plan_observations.h), sized by the same slots.
  const ParallelLayout layout(dp, pp, total_layers, m.parallelism.stage_layers, m.parallelism.cp, tp);
  in.exchange_ms = fastest_allreduce_ms(cluster_.world_link(), cluster_.world_size(),
                                        PlanObservationSlots(out.plan, layout, lengths.size()).bytes());
  PipelineSimResult sim = simulate_pipeline_iteration(in);
  std::vector<int64_t> counts;
  for (const auto& rank : out.plan.ranks) counts.push_back(static_cast<int64_t>(rank.size()));
  const PipelineMetrics metrics = compute_pipeline_metrics(sim.ranks, dp, pp, counts);
  out.simulate_ms = now_ms() - sim_start;

  record.iteration = iteration;
  record.warmup = iteration < train.warmup_iterations;
  record.loss = std::numeric_limits<double>::quiet_NaN();
  record.grad_norm = std::numeric_limits<double>::quiet_NaN();
  record.lr = learning_rate_at(iteration, train);
  record.set_pipeline_metrics(metrics);
  record.plan_exchange_ms = in.exchange_ms;
  record.balance_overhead_ms = plan_ms + in.exchange_ms;
  record.allreduce_ms = sim.max_allreduce_ms;

  out.timeline.iteration = iteration;
  // Simulated iterations follow each other on one time axis (ms since the run's start).
  out.timeline.origin_unix_ms = elapsed_ms_;
  elapsed_ms_ += metrics.iter_ms;
  out.timeline.ranks = std::move(sim.ranks);
  record.microbatch_lengths = plan_microbatch_lengths(out.plan, lengths);
  // As the trainer's record: floors only when some layer computed one.
  const bool any_floor = std::any_of(record.layer_floors.begin(), record.layer_floors.end(), [](const auto& layers) {
    return std::any_of(layers.begin(), layers.end(), [](int64_t f) { return f > 0; });
  });
  if (!any_floor) record.layer_floors.clear();
  planner_->observe(out.plan, lengths, realized, floors, sample_budgets, sample_references);
  return out;
}

}  // namespace sb
