#include "harness/train/trainer.h"

#include "harness/data/batch_shape.h"
#include "harness/train/method_planner_options.h"

#include "harness/parallel/error_text.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <set>

#include "common/errors.h"
#include "harness/common/peak_memory.h"
#include "harness/common/runqueue_wait.h"
#include "harness/common/system_info.h"
#include "harness/data/packed_microbatch.h"
#include "harness/parallel/object_exchange.h"
#include "harness/parallel/pipeline/pipeline_engine.h"
#include "harness/train/initial_model.h"
#include "harness/train/lr_schedule.h"
#include "harness/train/model_training_options.h"
#include "harness/train/plan_observations.h"
#include "kernels/attention/core/device_completion.h"

namespace sb {
namespace {

// Stops a run whose loss or gradient norm is not finite (train.nonfinite "stop"),
// naming the iteration, the first ranks whose shares are not finite, and the values. Every
// rank holds the shares (plan_observations.h), so every rank stops alike.
ConfigError non_finite_error(const Manifest& m, const ParallelLayout& layout, const PlanObservations& observed,
                             const IterationRecord& record) {
  const auto text = [](double v) {
    char s[32];
    std::snprintf(s, sizeof(s), "%g", v);
    return std::string(s);
  };
  // The ranks whose shares are not finite (a NaN spreads through the pipeline's backward,
  // so the rank it started on is among them, not necessarily the first).
  std::string source;
  size_t listed = 0;
  for (size_t r = 0; r < observed.loss_shares.size(); ++r) {
    std::string values;
    if (!std::isfinite(observed.loss_shares[r])) values = "loss sum " + text(observed.loss_shares[r]);
    if (!std::isfinite(observed.grad_norm_squared[r])) {
      values += (values.empty() ? "" : ", ") + std::string("squared gradient norm ") +
                text(observed.grad_norm_squared[r]);
    }
    if (values.empty()) continue;
    if (++listed > 4) {
      source += "; ...";
      break;
    }
    source += (source.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " (" +
              layout.describe_rank(static_cast<int64_t>(r)) + "): " + values;
  }
  return ConfigError(m.file, "$.train",
                     "iteration " + std::to_string(record.iteration) + ": the loss is " + text(record.loss) +
                         " and the gradient norm " + text(record.grad_norm) +
                         (source.empty() ? std::string() : " (" + source + ")") +
                         "; the run stopped there, " +
                         (record.skipped_step ? "without its optimizer step" : "after its optimizer step") +
                         " (its records and checkpoints up to it are kept)",
                     "lower train.lr (now " + text(m.train.lr) + ") or keep train.grad_clip on, and rerun (a changed "
                     "manifest restarts the run); or set train.nonfinite to \"skip\" to skip such steps");
}

// Intra-op threads: the manifest's choice, else the cores shared among this host's ranks
// (one rank alone keeps LibTorch's default).
void set_thread_count(int64_t configured, int64_t local_ranks) {
  if (const std::optional<int64_t> threads = intra_op_threads_to_set(configured, local_ranks)) {
    at::set_num_threads(static_cast<int>(*threads));
  }
}

AttentionBudgetRequest budget_request(const PlannedMicroBatch& planned) {
  AttentionBudgetRequest request;
  if (!planned.sequence_budgets.empty()) {
    request.top_k = planned.sequence_budgets;
  } else if (planned.budget > 0) {
    request.top_k.assign(planned.samples.size(), planned.budget);
  }
  request.coverage_floor_ratio = planned.coverage_floor_ratio;
  request.coverage_reference_k = planned.coverage_reference_k;
  return request;
}

PackedMicroBatch to_device(PackedMicroBatch mb, const c10::Device& device) {
  if (device.is_cpu()) return mb;
  mb.tokens = mb.tokens.to(device);
  mb.position_ids = mb.position_ids.to(device);
  mb.labels = mb.labels.to(device);
  return mb;
}

}  // namespace

StageMicroBatch Trainer::shard_for_context_parallelism(StageMicroBatch mb) const {
  auto sharding = std::make_shared<const CpSharding>(
      CpSharding::build(mb.packed.sequences, context_.layout.cp(), run_.manifest.parallelism.cp_layout));
  const int64_t c = context_.cp_rank();
  PackedMicroBatch& p = mb.packed;
  p.tokens = sharding->shard(p.tokens, c);
  p.position_ids = sharding->shard(p.position_ids, c);  // the global positions
  p.labels = sharding->shard(p.labels, c);
  p.sequences = PackedSequences::from_lengths({sharding->size_of(c)});  // the ring uses the sharding's packing
  p.loss_tokens = p.labels.ne(kIgnoreLabel).sum().item<int64_t>();
  mb.cp_sharding = std::move(sharding);
  return mb;
}

Trainer::Trainer(const RunSpec& run, const RankContext& context, TrainerOptions options)
    : run_(run),
      context_(context),
      timeline_(context.clock, context.rank, context.dp_rank(), context.stage()) {
  const Manifest& m = run_.manifest;
  const Qwen2Config& config = m.model.config;
  if (context_.layout.world_size() > 1 && !context_.exchange) {
    throw std::logic_error(context_.describe() + ": a job of " + std::to_string(context_.layout.world_size()) +
                           " ranks without the planner's exchange group (RankContext::connect makes it)");
  }
  set_thread_count(m.train.threads, context_.local_world_size);
  dataset_ = make_dataset(m.data, m.seed, dataset_limits(m));
  if (dataset_->max_length() > m.train.max_tokens_per_microbatch) {
    throw ConfigError(m.file, "$.train.max_tokens_per_microbatch",
                      "is smaller than the longest sample (" + std::to_string(dataset_->max_length()) + " tokens)",
                      "raise it to at least " + std::to_string(dataset_->max_length()));
  }
  if (options.make_batching) {
    test_batching_ = options.make_batching(m.methods.at(0).batching);
  } else {
    planner_ = std::make_unique<BatchPlanner>(method_planner_options(m, context_.layout.dp()), options.predictor);
  }
  if (!options.make_backend) {
    options.make_backend = [](const AttentionOptions& attention) {
      return std::shared_ptr<AttentionBackend>(attention.make_backend());
    };
  }
  const AttentionOptions& attention = m.methods.at(0).attention;
  std::shared_ptr<AttentionBackend> backend;
  if (context_.layout.cp() > 1) {
    // Attention as a ring over this stage's CP group (docs/context_parallel.md); under TP
    // too, the ring of this TP rank's heads over the CP ranks of the same TP rank.
    const ParallelLayout& layout = context_.layout;
    const int64_t dp_rank = context_.dp_rank(), stage_index = context_.stage(), tp_rank = context_.tp_rank();
    auto ring = std::make_shared<RingContext>(
        context_.context_parallel, context_.cp_rank(), layout.cp(), m.parallelism.cp_inner, context_.timeout,
        [layout, dp_rank, stage_index, tp_rank](int64_t c) {
          return layout.describe_rank(layout.rank_of(dp_rank, stage_index, c, tp_rank));
        });
    ring_backend_ = make_context_parallel_backend(attention, ring);
    backend = ring_backend_;
  } else {
    backend = options.make_backend(attention);
  }
  // The whole model from the seed, patched by the training options (LoRA draws its A
  // matrices here too), before the stage keeps its parts: every layout starts from the
  // one-process run's weights. Only this stage's tensors are read from model.from's
  // (memory-mapped) shards, so ranks on one host share the page cache instead of each
  // reading the whole checkpoint; the rest keeps its seeded values and is freed when the
  // stage has taken its parts.
  const int64_t stage = context_.stage();
  const StageLayers stage_layers = context_.layout.layers_of_stage(stage);
  const int64_t pp = context_.layout.pp();
  Qwen2ForCausalLM model = initial_model(m, backend, [&](const std::string& name) {
    return stage_uses_parameter(name, stage, pp, stage_layers, config.tie_word_embeddings);
  });
  const std::vector<at::Tensor> trainable = apply_model_training_options(model, m.train);
  stage_ = std::make_unique<PipelineStage>(model, stage, context_.layout.pp(), context_.layout.layers_of_stage(stage),
                                           backend);
  if (context_.layout.tp() > 1) {
    // This TP rank's shards, cut on the CPU before the move (docs/tensor_parallel.md).
    tensor_parallel_ = std::make_shared<TensorParallelGroup>(context_.tensor_parallel, context_.layout.tp(),
                                                             context_.tp_rank(), context_.timeout, context_.describe());
    stage_->enable_tensor_parallelism(tensor_parallel_);
    backend->set_head_shard_sum(tensor_parallel_vector_reduce(tensor_parallel_, context_.device));
  }
  stage_->move_to(context_.device);
  stage_->set_training(true);
  if (context_.pipeline) {
    const ParallelLayout& layout = context_.layout;
    const int64_t dp_rank = context_.dp_rank(), cp_rank = context_.cp_rank(), tp_rank = context_.tp_rank();
    channel_ = std::make_unique<PipelineChannel>(
        context_.pipeline, stage, context_.timeout, [layout, dp_rank, cp_rank, tp_rank](int64_t s) {
          return layout.describe_rank(layout.rank_of(dp_rank, s, cp_rank, tp_rank));
        });
  }
  // Only what trains has gradients to sum and an optimizer state (LoRA freezes the rest).
  std::set<const c10::TensorImpl*> trains;
  for (const at::Tensor& t : trainable) trains.insert(t.unsafeGetTensorImpl());
  for (const StageParameter& p : stage_->parameters()) {
    if (trains.count(p.tensor.unsafeGetTensorImpl()) != 0) trained_.push_back(p);
  }
  const auto bucket_bytes = static_cast<int64_t>(m.parallelism.bucket_mb * 1024 * 1024);
  // The tied embedding's two copies (first and last stage) sum their gradients only when it
  // trains: under LoRA it is frozen on both, and neither joins the embedding group's sum.
  const bool embedding_trains = std::any_of(trained_.begin(), trained_.end(), [](const StageParameter& p) {
    return p.name == "embed_tokens.weight";
  });
  gradients_ = std::make_unique<GradientSync>(trained_, std::max<int64_t>(1, bucket_bytes), context_.data_parallel,
                                              embedding_trains ? context_.embedding : nullptr, context_.timeout,
                                              context_.describe(), context_.tensor_parallel);
  std::vector<at::Tensor> params;
  for (const StageParameter& p : trained_) params.push_back(p.tensor);
  torch::optim::AdamWOptions adam(m.train.lr);
  adam.betas({m.train.adam_beta1, m.train.adam_beta2});
  adam.eps(m.train.adam_eps);
  adam.weight_decay(m.train.weight_decay);
  optimizer_ = std::make_unique<torch::optim::AdamW>(params, adam);
}

Trainer::~Trainer() = default;

GradientPass Trainer::compute_gradients(int64_t iteration) {
  const TrainSection& train = run_.manifest.train;
  GradientPass pass;
  timeline_.begin_iteration();

  double start = timeline_.now_ms();
  // Lengths of the whole batch for the plan; token ids only of this rank's samples, below.
  const BatchShape shape = dataset_->global_batch_shape(iteration, train.global_batch_size);
  const std::vector<int64_t>& lengths = shape.lengths;
  pass.tokens = shape.tokens;
  pass.loss_tokens = shape.loss_tokens;
  pass.sequences = shape.sequences;
  timeline_.record(EventKind::kData, -1, start, timeline_.now_ms());

  start = timeline_.now_ms();
  pass.lengths = lengths;
  pass.plan = test_batching_ ? test_batching_->plan(BatchingInput{lengths, context_.layout.dp(),
                                                                  train.max_tokens_per_microbatch,
                                                                  train.max_samples_per_microbatch})
                             : planner_->plan(lengths);
  pass.plan.validate(lengths, train.max_tokens_per_microbatch);
  const double planned = timeline_.now_ms();
  pass.report.balance_ms = planned - start;
  timeline_.record(EventKind::kPlan, -1, start, planned);

  start = timeline_.now_ms();
  std::vector<StageMicroBatch> mine;
  for (const PlannedMicroBatch& planned_mb : pass.plan.ranks.at(static_cast<size_t>(context_.dp_rank()))) {
    std::vector<Sample> drawn;
    for (int64_t p : planned_mb.samples) drawn.push_back(dataset_->batch_sample(iteration, train.global_batch_size, p));
    std::vector<const Sample*> members;
    for (const Sample& s : drawn) members.push_back(&s);
    StageMicroBatch mb{pack_microbatch(members), budget_request(planned_mb), nullptr};
    if (ring_backend_) mb = shard_for_context_parallelism(std::move(mb));
    mb.packed = to_device(std::move(mb.packed), context_.device);
    mine.push_back(std::move(mb));
  }
  timeline_.record(EventKind::kData, -1, start, timeline_.now_ms());

  gradients_->zero_grads();
  PipelineIterationResult result = run_one_f_one_b(*stage_, channel_.get(), mine,
                                                   static_cast<double>(pass.loss_tokens), timeline_);
  pass.report.loss_sum = result.loss_sum;
  pass.report.layer_stats = std::move(result.layer_stats);
  pass.report.tp_comm_ms = std::move(result.tp_comm_ms);
  if (ring_backend_) {
    const auto work = ring_backend_->take_work();
    for (size_t j = 0; j < mine.size(); ++j) {
      const auto found = work.find(mine[j].cp_sharding.get());
      if (found == work.end()) {
        pass.report.cp_attention_ms.push_back(0.0);
        pass.report.cp_kept_pairs.push_back(0);
        continue;
      }
      pass.report.cp_attention_ms.push_back(found->second.compute_ms);
      pass.report.cp_kept_pairs.push_back(found->second.kept_pairs);
      // The ring's steps on the timeline: steady-clock seconds to the common clock.
      const double offset_ms = CommonClock::local_now_ms() - timeline_.now_ms();
      for (const RingStepEvent& step : found->second.steps) {
        const double start = 1e3 * step.start_s - offset_ms, computed = start + 1e3 * step.compute_s;
        timeline_.record(EventKind::kRingCompute, static_cast<int64_t>(j), start, computed);
        timeline_.record(EventKind::kRingWait, static_cast<int64_t>(j), computed, computed + 1e3 * step.wait_s);
      }
    }
  }

  start = timeline_.now_ms();
  gradients_->all_reduce();
  const double reduced = timeline_.now_ms();
  pass.report.allreduce_ms = reduced - start;
  timeline_.record(EventKind::kAllReduce, -1, start, reduced);
  return pass;
}

double Trainer::global_grad_norm(double* local_squared) {
  // Squared norms of this stage's parameters (the tied copy counted once, on the first
  // stage), summed over the pipeline; DP ranks hold identical gradients by now. Under TP
  // the split tensors' shards are summed over the TP ranks and the tensors every TP rank
  // holds whole (identical gradients after GradientSync) are counted on TP rank 0 only.
  std::vector<at::Tensor> norms;
  for (const StageParameter& p : trained_) {
    if (p.tied_copy) continue;
    if (p.tp_split_dim < 0 && context_.tp_rank() != 0) continue;
    norms.push_back(p.tensor.grad().norm(2));
  }
  if (norms.empty()) norms.push_back(at::zeros({}, at::kDouble));  // a stage with nothing to train
  at::Tensor squared = at::stack(norms).to(at::kDouble).square().sum().reshape({1});  // [1]
  const at::Tensor local = squared.clone();  // read after the sums, with no extra host sync before them
  if (context_.pipeline) {
    std::vector<at::Tensor> tensors{squared};
    c10d::AllreduceOptions sum;
    sum.reduceOp = c10d::ReduceOp::SUM;
    try {
      wait_until_usable(context_.pipeline->allreduce(tensors, sum), context_.timeout, squared.device());
    } catch (const std::exception& e) {
      throw std::runtime_error(context_.describe() + ": summing the gradient norm over the pipeline failed: " +
                               error_text(e));
    }
  }
  if (tensor_parallel_) {
    at::Tensor on_device = squared.to(context_.device);
    tensor_parallel_->all_reduce(on_device);  // timed, but outside any micro-batch: not reported
    squared = on_device.cpu();
  }
  const double norm = std::sqrt(squared.item<double>());
  *local_squared = local.item<double>();
  return norm;
}

std::optional<IterationOutcome> Trainer::train_iteration(int64_t iteration) {
  const TrainSection& train = run_.manifest.train;
  const std::optional<double> waited_before = process_runqueue_wait_ms();
  const bool host_peak_reset = reset_peak_memory(context_.device);
  GradientPass pass = compute_gradients(iteration);

  IterationRecord record;
  record.iteration = iteration;
  record.warmup = iteration < train.warmup_iterations;
  // The norm's sums over the pipeline and TP groups wait for the slowest stage: outside
  // the optimizer's interval, which holds its compute only.
  record.grad_norm = global_grad_norm(&pass.report.grad_norm_squared);
  double start = timeline_.now_ms();
  record.lr = learning_rate_at(iteration, train);
  // Every rank holds the same global norm, so every rank takes (or skips) the step alike.
  record.skipped_step = !std::isfinite(record.grad_norm);
  if (!record.skipped_step) {
    if (train.grad_clip > 0) {
      // As torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when below 1.
      const double scale = train.grad_clip / (record.grad_norm + 1e-6);
      if (scale < 1.0) {
        for (const StageParameter& p : trained_) p.tensor.mutable_grad().mul_(scale);
      }
    }
    for (auto& group : optimizer_->param_groups()) group.options().set_lr(record.lr);
    optimizer_->step();
  }
  wait_for_device_work(context_.device);  // the step's kernels, not their launches
  timeline_.record(EventKind::kOptimizer, -1, start, timeline_.now_ms());

  // The planner's observations and the loss shares to every rank, in one sum
  // (plan_observations.h): each rank then plans the next batch itself.
  const PlanObservationSlots slots(pass.plan, context_.layout, pass.lengths.size());
  std::vector<double> summed = slots.share(context_.rank, timeline_.events(), pass.report.layer_stats,
                                           pass.report.loss_sum, pass.report.grad_norm_squared);
  start = timeline_.now_ms();
  if (context_.exchange) {
    summed = sum_over_ranks(*context_.exchange, summed, context_.exchange_device, context_.timeout,
                            context_.describe() + ": the planner's observation exchange");
  }
  const double exchanged = timeline_.now_ms();
  pass.report.plan_exchange_ms = exchanged - start;
  timeline_.record(EventKind::kPlanExchange, -1, start, exchanged);
  const PlanObservations observed = slots.read(summed, stage_->config().num_hidden_layers);

  pass.report.timeline = timeline_.end_iteration();
  const std::optional<double> waited_after = process_runqueue_wait_ms();
  if (waited_before && waited_after) pass.report.runqueue_wait_ms = std::max(0.0, *waited_after - *waited_before);
  pass.report.peak_memory = read_peak_memory(context_.device, host_peak_reset);

  record.loss_tokens = pass.loss_tokens;
  record.tokens = pass.tokens;
  record.sequences = pass.sequences;
  record.loss = record.loss_tokens > 0 ? observed.loss_sum() / static_cast<double>(record.loss_tokens) : 0.0;
  if ((!std::isfinite(record.loss) || !std::isfinite(record.grad_norm)) && train.nonfinite == NonFinitePolicy::kStop) {
    throw non_finite_error(run_.manifest, context_.layout, observed, record);
  }
  if (planner_) {
    planner_->observe(pass.plan, pass.lengths, observed.budgets, observed.floors, observed.sample_budgets,
                      observed.sample_references);
    planner_->observe_latencies(pass.plan, observed.latency_ms);
  }

  // The whole reports (timelines, statistics) go to rank 0 only, for the records.
  std::vector<RankIterationReport> reports;
  if (context_.world) {
    for (const std::string& text :
         gather_strings(*context_.world, rank_iteration_report_to_json(pass.report), /*root=*/0)) {
      reports.push_back(rank_iteration_report_from_json(text));
    }
  } else {
    reports.push_back(std::move(pass.report));
  }
  if (context_.rank != 0) return std::nullopt;
  assemble_iteration_record(reports, pass.plan, context_.layout, stage_->config().num_hidden_layers, record);
  record.microbatch_lengths = plan_microbatch_lengths(pass.plan, pass.lengths);
  std::vector<double> observed_ms;
  for (const auto& rank : observed.latency_ms) observed_ms.insert(observed_ms.end(), rank.begin(), rank.end());
  if (record.microbatch_ms != observed_ms) {
    throw std::logic_error("iteration " + std::to_string(iteration) +
                           ": the latencies the planner observed differ from the record's microbatch_ms");
  }

  IterationOutcome outcome;
  outcome.record = std::move(record);
  outcome.timeline.iteration = iteration;
  outcome.timeline.origin_unix_ms = context_.origin_unix_ms;
  for (auto& r : reports) outcome.timeline.ranks.push_back(std::move(r.timeline));
  return outcome;
}

}  // namespace sb
