// The trainer in one process (dp = pp = 1) against the plain model, and checkpoints:
// saved and loaded, training continues bit for bit as if never interrupted; a
// checkpoint folder is an HF model folder (HF names, config.json, index of shards).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <fstream>

#include "harness/config/manifest.h"
#include "harness/data/packed_microbatch.h"
#include "harness/data/synthetic_dataset.h"
#include "harness/train/checkpoint.h"
#include "harness/train/trainer.h"
#include "harness/train/training_run.h"
#include "models/qwen2/qwen2_hf_checkpoint.h"
#include "tests/support/run_command.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

RunSpec small_run(const std::string& preset = "qwen2-test") {
  json j = json::parse(R"({
    "name": "t", "seed": 17,
    "data": {"synthetic": {"length_mixture": [{"min_tokens": 8, "max_tokens": 60}]}},
    "train": {"iterations": 4, "warmup_iterations": 0, "global_batch_size": 6,
              "max_tokens_per_microbatch": 64, "lr": 0.01, "threads": 1},
    "methods": [{"name": "dense"}]
  })");
  j["model"] = {{"preset", preset}};
  return expand_runs(parse_manifest(j, "<test>")).at(0);
}

RankContext one_process(const RunSpec& run) {
  const auto& config = qwen2_preset(run.manifest.model.preset);
  return RankContext::single_process(ParallelLayout(1, 1, config.num_hidden_layers), c10::kCPU);
}

TEST(SingleProcessTrainer, GradientsEqualThePlainModelOnTheWholeBatch) {
  const RunSpec run = small_run();
  Trainer trainer(run, one_process(run));
  const GradientPass pass = trainer.compute_gradients(0);
  ASSERT_GT(pass.plan.ranks[0].size(), 2u) << "several micro-batches accumulate";

  at::manual_seed(17);
  Qwen2ForCausalLM model(qwen2_preset("qwen2-test"), dense_attention_options().make_backend());
  const std::vector<Sample> batch = SyntheticDataset(run.manifest.data.synthetic, 17).global_batch(0, 6);
  std::vector<const Sample*> all;
  for (const Sample& s : batch) all.push_back(&s);
  const PackedMicroBatch packed = pack_microbatch(all);
  const at::Tensor loss = at::cross_entropy_loss(model->forward(packed.tokens, packed.position_ids, packed.sequences),
                                                 packed.labels, {}, at::Reduction::Sum, kIgnoreLabel) /
                          static_cast<double>(packed.loss_tokens);
  loss.backward();
  EXPECT_NEAR(pass.report.loss_sum / static_cast<double>(pass.loss_tokens), loss.item<double>(), 1e-6);
  std::map<std::string, at::Tensor> reference;
  for (const auto& p : model->named_parameters()) reference[p.key()] = p.value().grad();
  ASSERT_EQ(trainer.stage().parameters().size(), reference.size());
  for (const StageParameter& p : trainer.stage().parameters()) {
    EXPECT_LE((p.tensor.grad() - reference.at(p.name)).abs().max().item<double>(), 1e-5) << p.name;
  }
}

std::vector<double> losses(Trainer& trainer, int64_t from, int64_t to) {
  std::vector<double> out;
  for (int64_t it = from; it < to; ++it) out.push_back(trainer.train_iteration(it)->record.loss);
  return out;
}

TEST(Checkpoint, ResumedTrainingContinuesBitForBit) {
  const fs::path run_dir = test::fresh_temp_dir("checkpoint_resume");
  const RunSpec run = small_run("qwen2-tiny");  // tied embeddings
  const RankContext context = one_process(run);
  Trainer first(run, context);
  losses(first, 0, 2);
  at::randn({7});  // move the generator on: the checkpoint must restore it
  save_checkpoint(run_dir, 2, run, context, first.stage(), first.optimizer());
  const at::Tensor expected_random = at::randn({5});
  const std::vector<double> expected = losses(first, 2, 4);

  ASSERT_EQ(latest_checkpoint(run_dir), run_dir / "checkpoints" / "iter_00000002");
  Trainer second(run, context);  // fresh weights, no optimizer state
  const CheckpointState state = load_checkpoint(*latest_checkpoint(run_dir), run, context, second.stage(),
                                                second.optimizer());
  EXPECT_EQ(state.iterations_done, 2);
  EXPECT_TRUE(at::equal(at::randn({5}), expected_random)) << "random generator state";
  const std::vector<double> resumed = losses(second, 2, 4);
  ASSERT_EQ(resumed.size(), expected.size());
  for (size_t i = 0; i < resumed.size(); ++i) EXPECT_EQ(resumed[i], expected[i]) << "iteration " << 2 + i;
  for (size_t i = 0; i < first.stage().parameters().size(); ++i) {
    EXPECT_TRUE(at::equal(first.stage().parameters()[i].tensor, second.stage().parameters()[i].tensor))
        << first.stage().parameters()[i].name;
  }
  fs::remove_all(run_dir);
}

TEST(Checkpoint, LoraRunResumesFromItsPeftAdapterBitForBit) {
  const fs::path run_dir = test::fresh_temp_dir("checkpoint_resume_lora");
  RunSpec run = small_run("qwen2-tiny");  // tied embeddings
  run.manifest.train.lora = LoraSection{4, 8.0, 0.0, {"q_proj", "v_proj", "down_proj"}};
  const RankContext context = one_process(run);
  Trainer first(run, context);
  losses(first, 0, 2);
  save_checkpoint(run_dir, 2, run, context, first.stage(), first.optimizer());
  const std::vector<double> expected = losses(first, 2, 4);

  const fs::path saved = *latest_checkpoint(run_dir);
  ASSERT_TRUE(fs::exists(saved / "adapter" / "adapter_config.json"));
  ASSERT_TRUE(fs::exists(saved / "adapter" / "adapter_model.safetensors"));
  EXPECT_FALSE(fs::exists(saved / "adapter-00001-of-00001.safetensors"));  // merged into adapter/
  Trainer second(run, context);  // the same base from the seed, fresh adapters (B = 0)
  load_checkpoint(saved, run, context, second.stage(), second.optimizer());
  const std::vector<double> resumed = losses(second, 2, 4);
  ASSERT_EQ(resumed.size(), expected.size());
  for (size_t i = 0; i < resumed.size(); ++i) EXPECT_EQ(resumed[i], expected[i]) << "iteration " << 2 + i;

  // Another seed rebuilds another base: refused, not resumed onto it.
  RunSpec reseeded = run;
  reseeded.manifest.seed = 18;
  Trainer third(reseeded, context);
  try {
    load_checkpoint(saved, reseeded, context, third.stage(), third.optimizer());
    FAIL() << "a checkpoint of seed 17 was loaded into a run of seed 18";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--force"), std::string::npos) << e.what();
  }
  fs::remove_all(run_dir);
}

// train_run's hooks see every iteration once, its checkpoints follow the manifest, and a
// run stopped after a checkpoint and resumed through train_run gives the uninterrupted
// run's losses (the oracle: the same run without the stop).
TEST(TrainingRun, ResumesFromItsOwnCheckpointAsIfNeverStopped) {
  const fs::path run_dir = test::fresh_temp_dir("training_run_resume");
  RunSpec run = small_run("qwen2-tiny");
  run.manifest.checkpoint.every_iterations = 2;
  const RankContext context = one_process(run);
  const auto record_losses = [](std::vector<double>& into) {
    return [&into](int64_t it, const IterationOutcome& outcome) {
      EXPECT_EQ(outcome.record.iteration, it);
      into.push_back(outcome.record.loss);
    };
  };

  std::vector<double> uninterrupted;
  TrainingRunOptions whole;
  whole.run_dir = test::fresh_temp_dir("training_run_whole");
  whole.on_iteration = record_losses(uninterrupted);
  TrainingRunResult finished;
  whole.on_finished = [&](const TrainingRunResult& r) { finished = r; };
  const TrainingRunResult result = train_run(run, context, whole);
  EXPECT_EQ(result.first_iteration, 0);
  EXPECT_EQ(finished.iterations, 4);
  ASSERT_EQ(uninterrupted.size(), 4u);
  EXPECT_EQ(latest_checkpoint(whole.run_dir), whole.run_dir / "checkpoints" / "iter_00000002")
      << "every 2 iterations, none after the last without at_end";

  std::vector<double> interrupted;
  TrainingRunOptions stopped;
  stopped.run_dir = run_dir;
  stopped.on_iteration = record_losses(interrupted);
  stopped.before_iteration = [](int64_t it, Trainer&) {
    if (it == 3) throw std::runtime_error("stopped on purpose");
  };
  EXPECT_THROW(train_run(run, context, stopped), std::runtime_error);
  ASSERT_EQ(interrupted.size(), 3u);

  std::vector<double> resumed;
  TrainingRunOptions again;
  again.run_dir = run_dir;
  again.resume_from = latest_checkpoint(run_dir);
  int64_t started_at = -1;
  again.on_started = [&](int64_t first) { started_at = first; };
  again.on_iteration = record_losses(resumed);
  EXPECT_EQ(train_run(run, context, again).first_iteration, 2);
  EXPECT_EQ(started_at, 2);
  ASSERT_EQ(resumed.size(), 2u);
  EXPECT_EQ(resumed[0], uninterrupted[2]);
  EXPECT_EQ(resumed[1], uninterrupted[3]);
  fs::remove_all(run_dir);
  fs::remove_all(whole.run_dir);
}

TEST(Checkpoint, IsAnHfModelFolderAndKeepsOnlyTheNewest) {
  const fs::path run_dir = test::fresh_temp_dir("checkpoint_hf");
  const RunSpec run = small_run();
  const RankContext context = one_process(run);
  Trainer trainer(run, context);
  losses(trainer, 0, 1);
  save_checkpoint(run_dir, 1, run, context, trainer.stage(), trainer.optimizer());
  losses(trainer, 1, 2);
  // The files read when the run started are what the checkpoint carries.
  SavedModelFiles at_start = saved_model_files(run.manifest);
  at_start.config["read_at_start"] = true;
  at_start.generation_config = nlohmann::json{{"eos_token_id", 7}};
  save_checkpoint(run_dir, 2, run, context, trainer.stage(), trainer.optimizer(), nullptr, at_start);
  EXPECT_FALSE(fs::exists(run_dir / "checkpoints" / "iter_00000001")) << "keep_last = 1";
  const fs::path dir = *latest_checkpoint(run_dir);
  for (const char* f : {"config.json", "model.safetensors.index.json", "model-00001-of-00001.safetensors",
                        "optimizer-00001-of-00001.safetensors", "rng-rank-00000.safetensors", "trainer_state.json"}) {
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  }
  EXPECT_FALSE(fs::exists(run_dir / "checkpoints" / "iter_00000002.partial"));
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(dir / "config.json")).value("read_at_start", false), true);
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(dir / "generation_config.json"))["eos_token_id"], 7);
  const Qwen2ForCausalLM loaded = qwen2_load_hf_model(dir, dense_attention_options().make_backend());
  std::map<std::string, at::Tensor> by_name;
  for (const auto& p : loaded->named_parameters()) by_name[p.key()] = p.value();
  for (const StageParameter& p : trainer.stage().parameters()) {
    EXPECT_TRUE(at::equal(by_name.at(p.name), p.tensor)) << p.name;
  }
  fs::remove_all(run_dir);
}

TEST(Checkpoint, ALayoutOrModelMismatchIsRefused) {
  const fs::path run_dir = test::fresh_temp_dir("checkpoint_mismatch");
  const RunSpec run = small_run();
  const RankContext context = one_process(run);
  Trainer trainer(run, context);
  save_checkpoint(run_dir, 0, run, context, trainer.stage(), trainer.optimizer());
  const RunSpec other = small_run("qwen2-tiny");
  const RankContext other_context = one_process(other);
  Trainer other_trainer(other, other_context);
  try {
    load_checkpoint(*latest_checkpoint(run_dir), other, other_context, other_trainer.stage(),
                    other_trainer.optimizer());
    FAIL() << "loaded a qwen2-test checkpoint into qwen2-tiny";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("qwen2-test"), std::string::npos) << e.what();
  }
  fs::remove_all(run_dir);
}

}  // namespace
}  // namespace sb
