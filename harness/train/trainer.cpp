#include "harness/train/trainer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>

#include <chrono>

#include "harness/train/lr_schedule.h"
#include "harness/train/model_training_options.h"
#include "harness/train/packed_microbatch.h"
#include "kernels/attention/attention_backend.h"

namespace sb {
namespace {

using Clock = std::chrono::steady_clock;

double elapsed_ms(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

}  // namespace

Trainer::Trainer(const RunSpec& run)
    : run_(run),
      dataset_(make_dataset(run.manifest.data, run.manifest.seed,
                            qwen2_preset(run.manifest.model.preset).vocab_size,
                            run.manifest.train.max_tokens_per_microbatch)),
      batching_(make_batching_policy(run.manifest.methods.at(0).batching)) {
  const Manifest& m = run_.manifest;
  if (m.train.threads > 0) at::set_num_threads(static_cast<int>(m.train.threads));
  at::manual_seed(static_cast<uint64_t>(m.seed));
  std::shared_ptr<AttentionBackend> backend = make_attention_backend(m.methods.at(0).attention.name);
  model_ = Qwen2ForCausalLM(qwen2_preset(m.model.preset), std::move(backend));
  model_->train();
  torch::optim::AdamWOptions options(m.train.lr);
  options.betas({m.train.adam_beta1, m.train.adam_beta2});
  options.eps(m.train.adam_eps);
  options.weight_decay(m.train.weight_decay);
  optimizer_ = std::make_unique<torch::optim::AdamW>(
      apply_model_training_options(model_, m.train), options);
}

Trainer::~Trainer() = default;

IterationRecord Trainer::train_iteration(int64_t iteration) {
  const TrainSection& train = run_.manifest.train;
  IterationRecord record;
  record.iteration = iteration;
  record.warmup = iteration < train.warmup_iterations;
  const auto iteration_start = Clock::now();

  const std::vector<Sample> batch = dataset_->global_batch(iteration, train.global_batch_size);
  std::vector<int64_t> lengths;
  for (const Sample& s : batch) {
    lengths.push_back(s.length());
    record.tokens += s.length();
    record.loss_tokens += s.loss_tokens();
  }
  record.sequences = static_cast<int64_t>(batch.size());

  const auto balance_start = Clock::now();
  const GlobalBatchPlan plan =
      batching_->plan(BatchingInput{lengths, /*dp=*/1, train.max_tokens_per_microbatch});
  record.balance_overhead_ms = elapsed_ms(balance_start);

  optimizer_->zero_grad();
  // Token mean over the global batch: every micro-batch's summed loss is divided by
  // the global count, so accumulated gradients equal those of one big batch.
  const double global_loss_tokens = static_cast<double>(record.loss_tokens);
  double loss_sum = 0;
  for (const PlannedMicroBatch& planned : plan.ranks.at(0)) {
    const auto microbatch_start = Clock::now();
    std::vector<const Sample*> members;
    for (int64_t p : planned.samples) members.push_back(&batch[static_cast<size_t>(p)]);
    PackedMicroBatch mb = pack_microbatch(members);
    at::Tensor logits = model_->forward(mb.tokens, mb.position_ids, mb.sequences);  // [T, V]
    at::Tensor summed = at::cross_entropy_loss(logits, mb.labels, /*weight=*/{},
                                               at::Reduction::Sum, kIgnoreLabel);
    (summed / global_loss_tokens).backward();
    loss_sum += summed.item<double>();
    record.microbatch_ms.push_back(elapsed_ms(microbatch_start));
    record.microbatch_tokens.push_back(mb.sequences.total_tokens());
  }

  record.grad_norm = torch::nn::utils::clip_grad_norm_(
      model_->parameters(), train.grad_clip > 0 ? train.grad_clip : 1e300);
  record.lr = learning_rate_at(iteration, train);
  for (auto& group : optimizer_->param_groups()) group.options().set_lr(record.lr);
  optimizer_->step();

  record.loss = loss_sum / global_loss_tokens;
  record.iter_ms = elapsed_ms(iteration_start);
  record.derive_single_stage_metrics();
  return record;
}

}  // namespace sb
