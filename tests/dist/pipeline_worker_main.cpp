// One rank of the DP x PP tests, started by test_pipeline_parallel.cpp with torchrun's
// variables. Usage:
//   sb_pipeline_worker gradients MANIFEST OUT_DIR   iteration 0's gradients (summed over
//       DP, before clipping; this TP rank's shards) and loss sum -> OUT_DIR/rank<r>.safetensors
//   sb_pipeline_worker gradients-after-step MANIFEST OUT_DIR   the same for iteration 1,
//       after iteration 0's optimizer step (LoRA's B is then non-zero, so A has gradients)
//   sb_pipeline_worker gradients-budgeted MANIFEST OUT_DIR   iteration 0's gradients as
//       `gradients`, with the data-order plan asking every sequence for a budget (kept
//       keys per query 4, 6, 8, 10 in turn; vertical-slash's axis) and a coverage floor of 0.6
//   sb_pipeline_worker checkpoint MANIFEST OUT_DIR  one training iteration, a checkpoint of
//       it under OUT_DIR/run/checkpoints/ (pp = 1), then every rank's logits of the trained
//       model on iteration 1's global batch packed as one micro-batch (under TP: this
//       rank's vocabulary columns) -> OUT_DIR/logits-rank<r>.safetensors
//   sb_pipeline_worker record MANIFEST OUT_DIR      one training iteration with the
//       recording attention backend and budgeting batching; rank 0 writes the record
//       to OUT_DIR/record.json, every rank its budget requests to requests-rank<r>.json
// Exit 0 on success, 1 with a message on stderr.

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <iostream>
#include <string>

#include "harness/balance/sequential_batching.h"
#include "harness/common/atomic_file.h"
#include "harness/config/manifest.h"
#include "harness/parallel/process_group.h"
#include "harness/parallel/rank_context.h"
#include "harness/data/packed_microbatch.h"
#include "harness/data/synthetic_dataset.h"
#include "harness/train/checkpoint.h"
#include "harness/train/trainer.h"
#include "models/safetensors/safetensors_writer.h"
#include "tests/support/recording_attention_backend.h"

namespace {

using nlohmann::json;

// The data-order plan with a budget for every sequence and a floor on every micro-batch:
// the same requests on every layout, so a budgeted run can be compared with one process.
class SequenceBudgetBatching : public sb::SequentialBatching {
 public:
  sb::GlobalBatchPlan plan(const sb::BatchingInput& input) override {
    sb::GlobalBatchPlan plan = sb::SequentialBatching::plan(input);
    int64_t next = 0;
    for (auto& rank : plan.ranks) {
      for (sb::PlannedMicroBatch& mb : rank) {
        mb.sequence_budgets.clear();
        for (size_t i = 0; i < mb.samples.size(); ++i) mb.sequence_budgets.push_back(4 + 2 * (next++ % 4));
        mb.coverage_floor_ratio = 0.6;
      }
    }
    return plan;
  }
};

int write_gradients(sb::Trainer& trainer, const std::filesystem::path& out, int rank, int64_t iteration) {
  for (int64_t it = 0; it < iteration; ++it) trainer.train_iteration(it);
  const sb::GradientPass pass = trainer.compute_gradients(iteration);
  std::vector<std::pair<std::string, at::Tensor>> grads;
  for (const sb::StageParameter& p : trainer.stage().parameters()) {
    if (!p.tensor.grad().defined()) continue;  // frozen under LoRA
    grads.emplace_back(p.tied_copy ? p.name + "@tied_copy" : p.name, p.tensor.grad());
  }
  char loss[64];
  std::snprintf(loss, sizeof(loss), "%.17g", pass.report.loss_sum);
  sb::write_safetensors(out / ("rank" + std::to_string(rank) + ".safetensors"), grads,
                        {{"loss_sum", loss},
                         {"loss_tokens", std::to_string(pass.loss_tokens)},
                         {"stage", std::to_string(trainer.context().stage())},
                         {"dp_rank", std::to_string(trainer.context().dp_rank())},
                         {"cp_rank", std::to_string(trainer.context().cp_rank())},
                         {"tp_rank", std::to_string(trainer.context().tp_rank())},
                         {"microbatches", std::to_string(pass.plan.ranks[trainer.context().dp_rank()].size())}});
  return 0;
}

// The `checkpoint` mode (see the usage above).
int checkpoint_and_logits(sb::Trainer& trainer, const std::filesystem::path& out, int rank) {
  trainer.train_iteration(0);
  sb::save_checkpoint(out / "run", 1, trainer.run(), trainer.context(), trainer.stage(), trainer.optimizer());
  const sb::Manifest& m = trainer.run().manifest;
  const sb::SyntheticDataset data(m.data.synthetic, m.seed);
  const std::vector<sb::Sample> batch = data.global_batch(1, m.train.global_batch_size);
  std::vector<const sb::Sample*> all;
  for (const sb::Sample& s : batch) all.push_back(&s);
  const sb::PackedMicroBatch packed = sb::pack_microbatch(all);
  c10::NoGradGuard no_grad;
  trainer.stage().set_training(false);
  const at::Tensor logits =
      trainer.stage().logits(trainer.stage().forward(packed.tokens, packed.position_ids, packed.sequences));
  sb::write_safetensors(out / ("logits-rank" + std::to_string(rank) + ".safetensors"), {{"logits", logits}},
                        {{"tp_rank", std::to_string(trainer.context().tp_rank())}});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: sb_pipeline_worker gradients|gradients-after-step|gradients-budgeted|checkpoint|record "
                 "MANIFEST OUT_DIR\n";
    return 2;
  }
  const std::string mode = argv[1];
  const std::filesystem::path out = argv[3];
  try {
    const sb::Manifest manifest = sb::load_manifest(argv[2]);
    const sb::RunSpec run = sb::expand_runs(manifest).at(0);
    const sb::DistEnv env = sb::DistEnv::from_environment();
    const char* timeout_text = std::getenv("SB_DIST_TIMEOUT_MS");
    const std::chrono::milliseconds timeout(timeout_text ? std::atoll(timeout_text) : 60000);
    const sb::Qwen2Config& config = sb::qwen2_preset(manifest.model.preset);
    const sb::ParallelLayout layout = sb::parallel_layout_of(manifest);
    const sb::RankContext context =
        env.world_size == 1 ? sb::RankContext::single_process(layout, c10::kCPU)
                            : sb::RankContext::connect(env, layout, sb::create_rendezvous_store(env, timeout), "test/",
                                                       c10::kCPU, config.tie_word_embeddings, timeout);
    sb::TrainerOptions options;
    std::shared_ptr<sb::test::RecordingAttentionBackend> recorder;
    if (mode == "gradients-budgeted") {
      options.make_batching = [](sb::BatchingKind) { return std::make_unique<SequenceBudgetBatching>(); };
    }
    if (mode == "record") {
      recorder = std::make_shared<sb::test::RecordingAttentionBackend>();
      options.make_backend = [recorder](const sb::AttentionOptions&) { return recorder; };
      options.make_batching = [](sb::BatchingKind) { return std::make_unique<sb::test::BudgetingBatching>(); };
    }
    sb::Trainer trainer(run, context, options);
    if (mode == "gradients" || mode == "gradients-budgeted") return write_gradients(trainer, out, env.rank, 0);
    if (mode == "gradients-after-step") return write_gradients(trainer, out, env.rank, 1);
    if (mode == "checkpoint") return checkpoint_and_logits(trainer, out, env.rank);
    if (mode != "record") {
      std::cerr << "unknown mode " << mode << "\n";
      return 2;
    }
    std::optional<sb::IterationOutcome> outcome = trainer.train_iteration(0);
    json requests = json::array();
    for (const auto& r : recorder->requests) requests.push_back(r.top_k);
    sb::write_file_atomic(out / ("requests-rank" + std::to_string(env.rank) + ".json"), requests.dump());
    if (outcome) sb::write_file_atomic(out / "record.json", sb::iteration_record_to_json(outcome->record).dump(2));
    context.barrier();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "rank failed: " << e.what() << "\n";
    return 1;
  }
}
