// DP x PP training equals one-process training. Real sb_pipeline_worker processes
// (Gloo on the CPU, float32) compute iteration 0's loss and gradients for layouts
// DP2, PP2, DP2 x PP2, PP3 (explicit split), PP4, and a DP rank without micro-batches;
// the oracle is the plain model (Qwen2ForCausalLM::forward, no pipeline code) on the
// whole global batch packed as ONE sequence set in this process. Every gradient of
// every rank must match within 1e-5 absolute, the loss within 1e-5 relative. The
// micro-batches have different lengths and DP ranks different micro-batch counts, and
// the 1F1B schedule runs with m > p, m < p and m = 1. Also: attention budgets reach
// the backend on every stage and statistics from all stages reach the record.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <set>

#include "harness/balance/sequential_batching.h"
#include "harness/common/atomic_file.h"
#include "harness/config/manifest.h"
#include "harness/data/packed_microbatch.h"
#include "harness/data/synthetic_dataset.h"
#include "models/qwen2/qwen2_hf_checkpoint.h"
#include "models/qwen2/qwen2_model.h"
#include "models/safetensors/safetensors_file.h"
#include "tests/support/free_tcp_port.h"
#include "tests/support/recording_attention_backend.h"
#include "tests/support/run_command.h"
#include "tests/support/worker_processes.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Case {
  std::string name;
  int64_t dp, pp;
  std::string preset;
  int64_t global_batch;
  std::vector<int64_t> stage_layers;  // empty: the even split
  int64_t cp = 1;                     // context parallelism: the ring over cp ranks
  std::string cp_layout = "striped";
  int64_t cp_inner = 0;               // 0: a flat ring
  int64_t cp_stripe_tokens = 8;       // striped: shorter than the samples
  int64_t tp = 1;                     // tensor parallelism with sequence parallelism
  std::string attention = "dense";    // "moba": block 8, top-k 2; "vertical_slash": top-k, blocks of 4
  bool lora = false;                  // LoRA r 4 on every projection, the rest frozen
  double lora_dropout = 0.0;          // on the adapters' inputs
  bool activation_checkpointing = false;  // every decoder layer recomputed in the backward
  bool after_step = false;  // compare iteration 1's gradients, after one optimizer step
  bool budgeted = false;    // every sequence asks for a budget, every micro-batch a floor (worker mode)
  std::string precision = "fp32";  // "bf16-mixed": compared within kBf16RelativeTolerance of each tensor's scale
};

// bf16 rounds every product; the TP ranks round partial sums the one process never forms.
constexpr double kBf16RelativeTolerance = 1e-2;

std::string gradient_mode(const Case& c) {
  if (c.budgeted) return "gradients-budgeted";
  return c.after_step ? "gradients-after-step" : "gradients";
}

// The same case on one process: dp = pp = cp = tp = 1.
Case one_process_case(Case c) {
  c.name += "_one_process";
  c.dp = c.pp = c.cp = c.tp = 1;
  c.stage_layers.clear();
  return c;
}

json case_manifest(const Case& c) {
  json j = json::parse(R"({
    "seed": 11,
    "data": {"synthetic": {"length_mixture": [{"min_tokens": 8, "max_tokens": 60}]}},
    "train": {"iterations": 1, "warmup_iterations": 0, "max_tokens_per_microbatch": 64, "lr": 0.01,
              "lr_warmup_fraction": 0},
    "methods": [{"name": "dense"}]
  })");
  j["name"] = c.name;
  j["model"] = {{"preset", c.preset}};
  j["train"]["global_batch_size"] = c.global_batch;
  j["parallelism"] = {{"dp", c.dp}, {"pp", c.pp}, {"timeout_s", 60}};
  if (c.cp > 1) {
    j["parallelism"]["cp"] = c.cp;
    j["parallelism"]["cp_layout"] = c.cp_layout;
    j["parallelism"]["cp_stripe_tokens"] = c.cp_stripe_tokens;
    j["parallelism"]["cp_inner"] = c.cp_inner;
  }
  if (!c.stage_layers.empty()) j["parallelism"]["stage_layers"] = c.stage_layers;
  if (c.tp > 1) j["parallelism"]["tp"] = c.tp;
  if (c.activation_checkpointing) j["train"]["activation_checkpointing"] = true;
  j["train"]["precision"] = c.precision;
  if (c.attention == "moba") {
    j["methods"] = json::parse(R"([{"name": "moba", "attention": {"name": "moba", "block_size": 8, "top_k": 2}}])");
  }
  if (c.attention == "vertical_slash") {  // sparse at these lengths: 2 sinks, 3 offsets, 3 columns, 2 slashes
    j["methods"] = json::parse(R"([{"name": "vs", "attention": {"name": "vertical_slash", "budget": "top_k",
        "vertical_count": 3, "slash_count": 2, "sink_tokens": 2, "local_window": 3, "last_queries": 8,
        "block_size": 4}}])");
  }
  if (c.lora) {
    j["train"]["lora"] = {{"rank", 4}, {"alpha", 8.0}, {"dropout", c.lora_dropout},
                          {"target_modules", {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}}};
  }
  return j;
}

// Runs dp * pp workers in `mode`; fails the test with their logs unless all exit 0.
void run_workers(const std::string& mode, const Case& c, const fs::path& dir) {
  const fs::path manifest = dir / "manifest.json";
  std::ofstream(manifest) << case_manifest(c).dump(2);
  const int world = static_cast<int>(c.dp * c.pp * c.cp * c.tp);
  const int port = test::free_tcp_port();
  std::vector<test::Worker> workers;
  for (int rank = 0; rank < world; ++rank) {
    workers.push_back(test::spawn_worker({SB_BINARY_DIR "/tests/sb_pipeline_worker", mode, manifest.string(), dir.string()},
                                         test::rank_env(rank, world, port),
                                         dir / ("rank" + std::to_string(rank) + ".log")));
  }
  const auto deadline = Clock::now() + std::chrono::seconds(240);
  for (int rank = 0; rank < world; ++rank) {
    const int code = test::wait_worker(workers[rank], deadline);
    ASSERT_EQ(code, 0) << c.name << " rank " << rank << ":\n" << test::slurp(workers[rank].log);
  }
}

struct Oracle {
  double loss = 0;
  std::map<std::string, at::Tensor> grads;  // by module path
  GlobalBatchPlan plan;                     // the plan every rank computes
};

// The plain model on the whole global batch, packed as one micro-batch.
Oracle one_process_oracle(const Case& c) {
  const Manifest m = parse_manifest(case_manifest(c), c.name);
  at::manual_seed(static_cast<uint64_t>(m.seed));
  Qwen2ForCausalLM model(qwen2_preset(m.model.preset), dense_attention_options().make_backend());
  model->train();
  const SyntheticDataset data(m.data.synthetic, m.seed);
  // The global batch the compared gradients come from (its plan is what every rank runs).
  const std::vector<Sample> batch = data.global_batch(c.after_step ? 1 : 0, m.train.global_batch_size);
  std::vector<const Sample*> all;
  std::vector<int64_t> lengths;
  int64_t loss_tokens = 0;
  for (const Sample& s : batch) {
    all.push_back(&s);
    lengths.push_back(s.length());
    loss_tokens += s.loss_tokens();
  }
  const PackedMicroBatch packed = pack_microbatch(all);
  const at::Tensor summed = at::cross_entropy_loss(model->forward(packed.tokens, packed.position_ids, packed.sequences),
                                                   packed.labels, {}, at::Reduction::Sum, kIgnoreLabel);
  const at::Tensor loss = summed / static_cast<double>(loss_tokens);
  loss.backward();
  Oracle o;
  o.loss = loss.item<double>();
  for (const auto& p : model->named_parameters()) o.grads[p.key()] = p.value().grad().clone();
  o.plan = SequentialBatching().plan(BatchingInput{lengths, c.dp, m.train.max_tokens_per_microbatch});
  return o;
}

std::vector<int64_t> microbatch_counts(const GlobalBatchPlan& plan) {
  std::vector<int64_t> counts;
  for (const auto& rank : plan.ranks) counts.push_back(static_cast<int64_t>(rank.size()));
  return counts;
}

// The one-process trainer's gradients (a worker run alone): the oracle where the plain
// model cannot be one (MoBA's budgets come through the trainer, LoRA freezes the base).
Oracle one_process_worker_oracle(const Case& c) {
  const Case alone = one_process_case(c);
  Oracle o;
  o.plan = one_process_oracle(c).plan;  // the plan the layout's ranks compute
  const fs::path dir = test::fresh_temp_dir("pp_" + alone.name);
  run_workers(gradient_mode(c), alone, dir);
  const SafetensorsFile file = SafetensorsFile::open(dir / "rank0.safetensors");
  o.loss = std::stod(file.metadata().at("loss_sum")) / std::stod(file.metadata().at("loss_tokens"));
  for (const std::string& name : file.names()) o.grads[name] = file.tensor(name);
  fs::remove_all(dir);
  return o;
}

// A gradient whole again from its TP shards (in TP rank order): a tensor held whole has
// the reference's shape on every rank and must be the same on all; a split one differs
// from the reference in one dimension, along which the shards are put together.
at::Tensor from_tensor_parallel_shards(const std::vector<at::Tensor>& shards, const at::Tensor& reference,
                                       const std::string& name) {
  if (shards.front().sizes() == reference.sizes()) {
    for (const at::Tensor& s : shards) EXPECT_TRUE(at::equal(s, shards.front())) << name << " differs between TP ranks";
    return shards.front();
  }
  for (int64_t d = 0; d < reference.dim(); ++d) {
    if (shards.front().size(d) != reference.size(d)) return at::cat(shards, d);
  }
  ADD_FAILURE() << name;
  return shards.front();
}

// Compares every worker's gradients and the summed loss with the oracle.
void expect_equal_to_one_process(const Case& c, const fs::path& dir, const Oracle& oracle) {
  double loss_sum = 0;
  int64_t loss_tokens = 0;
  std::set<std::string> covered;
  double worst = 0;
  std::string worst_name;
  // (first rank of the TP group, name) -> shards in TP rank order
  std::map<std::pair<int64_t, std::string>, std::vector<at::Tensor>> shards;
  for (int64_t rank = 0; rank < c.dp * c.pp * c.cp * c.tp; ++rank) {
    const SafetensorsFile file = SafetensorsFile::open(dir / ("rank" + std::to_string(rank) + ".safetensors"));
    const auto& meta = file.metadata();
    const int64_t stage = std::stoll(meta.at("stage")), dp_rank = std::stoll(meta.at("dp_rank"));
    EXPECT_EQ(std::stoll(meta.at("tp_rank")), rank % c.tp);
    EXPECT_EQ(std::stoll(meta.at("cp_rank")), rank / c.tp % c.cp);
    EXPECT_EQ(stage, rank / c.tp / c.cp % c.pp);
    EXPECT_EQ(dp_rank, rank / c.tp / c.cp / c.pp);
    EXPECT_EQ(std::stoll(meta.at("microbatches")), microbatch_counts(oracle.plan)[static_cast<size_t>(dp_rank)]);
    // Every TP rank of a last stage computes the whole loss: count TP rank 0's.
    if (stage == c.pp - 1 && rank % c.tp == 0) loss_sum += std::stod(meta.at("loss_sum"));
    loss_tokens = std::stoll(meta.at("loss_tokens"));
    for (const std::string& name : file.names()) shards[{rank - rank % c.tp, name}].push_back(file.tensor(name));
  }
  for (const auto& [key, parts] : shards) {
    const auto& [rank, name] = key;
    {
      const std::string module_path = name.substr(0, name.find('@'));
      ASSERT_TRUE(oracle.grads.count(module_path)) << name;
      ASSERT_EQ(static_cast<int64_t>(parts.size()), c.tp) << name;
      const at::Tensor reference = oracle.grads.at(module_path);
      const at::Tensor mine = from_tensor_parallel_shards(parts, reference, name);
      ASSERT_EQ(mine.sizes(), reference.sizes()) << name;
      const double diff = (mine.to(at::kDouble) - reference.to(at::kDouble)).abs().max().item<double>();
      if (diff > worst) {
        worst = diff;
        worst_name = "rank " + std::to_string(rank) + " " + name;
      }
      const double scale = reference.abs().max().item<double>();
      const double tolerance = c.precision == "fp32" ? 1e-5 : 1e-5 + kBf16RelativeTolerance * scale;
      EXPECT_LE(diff, tolerance) << c.name << " rank " << rank << " " << name << " max |grad| " << scale;
      // A's gradients after a step are small (B is about the learning rate): within 1e-3 of
      // their own scale as well, so a zero or wrong one cannot hide under 1e-5.
      if (c.after_step && name.find(".lora_A.") != std::string::npos) {
        EXPECT_LE(diff, 1e-3 * scale) << c.name << " rank " << rank << " " << name;
      }
      if (name.find('@') == std::string::npos) covered.insert(module_path);
    }
  }
  if (c.lora) {
    for (const auto& item : oracle.grads) {
      EXPECT_NE(item.first.find(".lora_"), std::string::npos) << "LoRA trains the adapters only: " << item.first;
    }
  }
  std::cout << "[" << c.name << "] loss " << loss_sum / static_cast<double>(loss_tokens) << " vs one process "
            << oracle.loss << "; largest gradient difference " << worst << " (" << worst_name << ")\n";
  EXPECT_NEAR(loss_sum / static_cast<double>(loss_tokens), oracle.loss,
              (c.precision == "fp32" ? 1e-5 : kBf16RelativeTolerance) * oracle.loss);
  EXPECT_EQ(covered.size(), oracle.grads.size()) << "every parameter lives on exactly one stage";
}

void check_case(const Case& c, const std::function<void(const GlobalBatchPlan&)>& expect_plan) {
  const fs::path dir = test::fresh_temp_dir("pp_" + c.name);
  const bool plain_model = c.attention == "dense" && !c.lora && !c.after_step && !c.budgeted && c.precision == "fp32";
  const Oracle oracle = plain_model ? one_process_oracle(c) : one_process_worker_oracle(c);
  expect_plan(oracle.plan);
  std::set<int64_t> lengths;
  for (const auto& rank : oracle.plan.ranks) {
    for (const auto& mb : rank) lengths.insert(mb.tokens);
  }
  if (oracle.plan.microbatch_count() > 1) EXPECT_GT(lengths.size(), 1u) << "micro-batches should differ in length";
  run_workers(gradient_mode(c), c, dir);
  if (::testing::Test::HasFatalFailure()) return;
  expect_equal_to_one_process(c, dir, oracle);
  if (c.lora && c.after_step) {
    // B moved off zero, so A has gradients (seen 1.7e-5 to 2.8e-4 at their largest; they
    // are also compared relative to that scale above).
    for (const auto& [name, grad] : oracle.grads) {
      if (name.find(".lora_A.") != std::string::npos) EXPECT_GT(grad.abs().max().item<double>(), 0.0) << name;
    }
  }
  fs::remove_all(dir);
}

TEST(PipelineParallel, DataParallelTwoEqualsOneProcess) {
  check_case({"dp2", 2, 1, "qwen2-test", 8, {}}, [](const GlobalBatchPlan& plan) {
    const auto counts = microbatch_counts(plan);
    EXPECT_NE(counts[0], counts[1]) << "DP ranks should train different micro-batch counts";
  });
}

TEST(PipelineParallel, PipelineTwoStagesEqualsOneProcess) {
  check_case({"pp2", 1, 2, "qwen2-test", 7, {}}, [](const GlobalBatchPlan& plan) {
    EXPECT_GT(plan.ranks[0].size(), 2u) << "steady 1F1B phase: more micro-batches than stages";
  });
}

TEST(PipelineParallel, DataTimesPipelineTwoByTwoWithTiedEmbeddingsEqualsOneProcess) {
  check_case({"dp2xpp2", 2, 2, "qwen2-tiny", 10, {}}, [](const GlobalBatchPlan& plan) {
    const auto counts = microbatch_counts(plan);
    EXPECT_NE(counts[0], counts[1]) << "DP ranks should train different micro-batch counts";
  });
}

TEST(PipelineParallel, ThreeStagesWithExplicitSplitAndOneMicroBatch) {
  check_case({"pp3_split", 1, 3, "qwen2-tiny", 1, {2, 1, 1}}, [](const GlobalBatchPlan& plan) {
    EXPECT_EQ(plan.ranks[0].size(), 1u) << "a single micro-batch through three stages";
  });
}

TEST(PipelineParallel, FourStagesWithFewerMicroBatchesThanStages) {
  check_case({"pp4", 1, 4, "qwen2-tiny", 3, {}}, [](const GlobalBatchPlan& plan) {
    EXPECT_GT(plan.ranks[0].size(), 1u);
    EXPECT_LT(plan.ranks[0].size(), 4u) << "warm-up cut short: m < p";
  });
}

TEST(PipelineParallel, DataParallelRankWithoutMicroBatches) {
  check_case({"dp2_empty", 2, 2, "qwen2-test", 1, {}}, [](const GlobalBatchPlan& plan) {
    EXPECT_EQ(microbatch_counts(plan), (std::vector<int64_t>{1, 0}));
  });
}

// Context parallelism in the trainer: each micro-batch's tokens dealt over the CP ranks,
// attention as a ring, gradients summed over DP x CP; the loss is the sum of every CP
// rank's share.
TEST(ContextParallel, FourCpRanksEqualOneProcess) {
  check_case({"cp4", 1, 1, "qwen2-test", 6, {}, 4, "striped"}, [](const GlobalBatchPlan&) {});
}

TEST(ContextParallel, HierarchicalRingOfTwoInnerRingsEqualsOneProcess) {
  check_case({"cp4_inner2", 1, 1, "qwen2-test", 6, {}, 4, "zigzag", 2}, [](const GlobalBatchPlan&) {});
}

TEST(ContextParallel, DataParallelTwoTimesCpTwoEqualsOneProcess) {
  check_case({"dp2xcp2", 2, 1, "qwen2-tiny", 8, {}, 2, "zigzag"}, [](const GlobalBatchPlan& plan) {
    const auto counts = microbatch_counts(plan);
    EXPECT_NE(counts[0], counts[1]) << "DP ranks should train different micro-batch counts";
  });
}

// Stripes of 64 tokens and micro-batches of at most 64: CP rank 1 holds no token of most
// micro-batches and still runs every layer (zero rows) and takes part in every ring.
TEST(ContextParallel, RanksWithoutTokensInAMicroBatchEqualOneProcess) {
  Case c{"cp2_empty_rank", 1, 1, "qwen2-test", 6, {}, 2, "striped"};
  c.cp_stripe_tokens = 64;
  c.attention = "moba";
  check_case(c, [](const GlobalBatchPlan&) {});
}

TEST(ContextParallel, PipelineTwoTimesCpTwoWithTiedEmbeddingsEqualsOneProcess) {
  check_case({"pp2xcp2", 1, 2, "qwen2-tiny", 5, {}, 2, "contiguous"}, [](const GlobalBatchPlan& plan) {
    EXPECT_GT(plan.ranks[0].size(), 2u) << "steady 1F1B phase: more micro-batches than stages";
  });
}

// Tensor parallelism with sequence parallelism (docs/tensor_parallel.md): heads, MLP
// columns and the vocabulary split over the TP ranks, the residual stream split by
// tokens. qwen2-test-kv4: GQA 8:4 and a vocabulary of 125 (uneven shards at tp 2 and 4),
// tied embeddings; micro-batches of different lengths whose token counts mostly do not
// divide by tp (padding rows). The gradients of the split tensors are compared after
// putting the TP ranks' shards together.
Case tp_case(const std::string& name, int64_t dp, int64_t pp, int64_t tp, int64_t batch, const std::string& attention,
             bool lora) {
  Case c{name, dp, pp, "qwen2-test-kv4", batch, {}};
  c.tp = tp;
  c.attention = attention;
  c.lora = lora;
  return c;
}

const auto any_plan = [](const GlobalBatchPlan&) {};

TEST(TensorParallel, TwoRanksEqualOneProcess) { check_case(tp_case("tp2", 1, 1, 2, 6, "dense", false), any_plan); }

TEST(TensorParallel, FourRanksEqualOneProcess) { check_case(tp_case("tp4", 1, 1, 4, 5, "dense", false), any_plan); }

TEST(TensorParallel, TwoRanksWithMobaEqualOneProcess) {
  check_case(tp_case("tp2_moba", 1, 1, 2, 6, "moba", false), any_plan);
}

// Each TP rank builds its heads' vertical-slash index from its own heads' attention.
TEST(TensorParallel, TwoRanksWithVerticalSlashEqualOneProcess) {
  check_case(tp_case("tp2_vertical_slash", 1, 1, 2, 6, "vertical_slash", false), any_plan);
}

// DST's requests over vertical-slash (a kept-keys budget per sequence, a floor): each
// sequence's level is searched over both TP ranks' heads (vertical_slash_sharded_budget.h),
// so every head runs the one process's lists.
TEST(TensorParallel, TwoRanksWithVerticalSlashUnderABudgetEqualOneProcess) {
  Case c = tp_case("tp2_vertical_slash_budget", 1, 1, 2, 6, "vertical_slash", false);
  c.budgeted = true;
  check_case(c, any_plan);
}

TEST(TensorParallel, TwoRanksWithLoraEqualOneProcess) {
  check_case(tp_case("tp2_lora", 1, 1, 2, 6, "dense", true), any_plan);
}

// At iteration 0 LoRA's B is zero, so every A gradient is zero on both sides; after one
// step they are not, and they, B's and the loss still equal one process.
TEST(TensorParallel, TwoRanksWithLoraAfterAStepEqualOneProcess) {
  Case c = tp_case("tp2_lora_step", 1, 1, 2, 6, "dense", true);
  c.after_step = true;
  check_case(c, any_plan);
}

// LoRA dropout: the column-parallel adapters see the whole input on every TP rank and
// draw its mask alike; the row-parallel ones draw the whole input's mask and keep their
// columns (Qwen2Linear::set_input_shard). Every rank draws what the one process draws, so
// with the same seed the masks are its masks: at iteration 0 B's gradients carry them (A's
// are zero while B is), after a step A's too.
TEST(TensorParallel, TwoRanksWithLoraDropoutEqualOneProcess) {
  Case c = tp_case("tp2_lora_dropout", 1, 1, 2, 6, "dense", true);
  c.lora_dropout = 0.3;
  check_case(c, any_plan);
}

// The recomputed forward of activation checkpointing replays the generator, so it draws
// the same whole-input masks again.
TEST(TensorParallel, TwoRanksWithLoraDropoutAndActivationCheckpointingEqualOneProcess) {
  Case c = tp_case("tp2_lora_dropout_recompute", 1, 1, 2, 6, "dense", true);
  c.lora_dropout = 0.3;
  c.activation_checkpointing = true;
  check_case(c, any_plan);
}

TEST(TensorParallel, FourRanksWithLoraDropoutAfterAStepEqualOneProcess) {
  Case c = tp_case("tp4_lora_dropout_step", 1, 1, 4, 5, "dense", true);
  c.lora_dropout = 0.3;
  c.after_step = true;
  check_case(c, any_plan);
}

TEST(TensorParallel, DataParallelTwoTimesTpTwoWithMobaEqualsOneProcess) {
  check_case(tp_case("dp2xtp2_moba", 2, 1, 2, 8, "moba", false), [](const GlobalBatchPlan& plan) {
    const auto counts = microbatch_counts(plan);
    EXPECT_NE(counts[0], counts[1]) << "DP ranks should train different micro-batch counts";
  });
}

TEST(TensorParallel, PipelineTwoTimesTpTwoWithLoraAndTiedEmbeddingsEqualsOneProcess) {
  check_case(tp_case("pp2xtp2_lora", 1, 2, 2, 5, "dense", true), [](const GlobalBatchPlan& plan) {
    EXPECT_GT(plan.ranks[0].size(), 2u) << "steady 1F1B phase: more micro-batches than stages";
  });
}

// qwen2-test: an untied lm_head, split by vocabulary over the last stage's TP ranks.
TEST(TensorParallel, PipelineTwoTimesTpTwoWithAnUntiedHeadEqualsOneProcess) {
  Case c = tp_case("pp2xtp2_untied", 1, 2, 2, 6, "dense", false);
  c.preset = "qwen2-test";
  check_case(c, any_plan);
}

// Each layer's forward, its all-gathers and reduce-scatters included, runs again in the
// backward.
TEST(TensorParallel, TwoRanksWithActivationCheckpointingEqualOneProcess) {
  Case c = tp_case("tp2_recompute", 1, 1, 2, 6, "dense", false);
  c.activation_checkpointing = true;
  check_case(c, any_plan);
}

// bf16-mixed: the collectives carry bf16 activations and the vocabulary-parallel loss
// reduces bf16 logits' statistics; against the one-process bf16 trainer.
TEST(TensorParallel, PipelineTwoTimesTpTwoInBf16EqualsOneProcessWithinBf16) {
  Case c = tp_case("pp2xtp2_bf16", 1, 2, 2, 6, "dense", false);
  c.precision = "bf16-mixed";
  check_case(c, any_plan);
}

TEST(TensorParallel, DataTwoPipelineTwoTensorTwoEqualsOneProcess) {
  check_case(tp_case("dp2xpp2xtp2", 2, 2, 2, 8, "dense", false), any_plan);
}

TEST(TensorParallel, DataTwoPipelineTwoTensorTwoWithMobaAndLoraEqualsOneProcess) {
  check_case(tp_case("dp2xpp2xtp2_moba_lora", 2, 2, 2, 8, "moba", true), any_plan);
}

// Context and tensor parallelism together: each CP rank's tokens are split again by
// sequence parallelism over its TP ranks, and each TP rank's heads run as a ring over the
// CP ranks of the same TP rank (docs/context_parallel.md). MoBA's floor and the
// vertical-slash statistics read every head through the TP group inside the ring.
Case cp_tp_case(const std::string& name, int64_t dp, int64_t pp, int64_t cp, const std::string& layout,
                const std::string& attention, bool lora, int64_t batch) {
  Case c = tp_case(name, dp, pp, 2, batch, attention, lora);
  c.cp = cp;
  c.cp_layout = layout;
  return c;
}

TEST(ContextTensorParallel, CpTwoTimesTpTwoEqualsOneProcess) {
  check_case(cp_tp_case("cp2xtp2", 1, 1, 2, "striped", "dense", false, 6), any_plan);
}

TEST(ContextTensorParallel, CpTwoTimesTpTwoWithMobaAndLoraEqualsOneProcess) {
  check_case(cp_tp_case("cp2xtp2_moba_lora", 1, 1, 2, "zigzag", "moba", true, 6), any_plan);
}

TEST(ContextTensorParallel, CpTwoTimesTpTwoWithVerticalSlashEqualsOneProcess) {
  check_case(cp_tp_case("cp2xtp2_vertical_slash", 1, 1, 2, "contiguous", "vertical_slash", false, 6), any_plan);
}

// The same on a CP ring: the ring's index sums over the CP ranks, then the level search over
// the TP ranks' heads.
TEST(ContextTensorParallel, CpTwoTimesTpTwoWithVerticalSlashUnderABudgetEqualsOneProcess) {
  Case c = cp_tp_case("cp2xtp2_vertical_slash_budget", 1, 1, 2, "striped", "vertical_slash", false, 6);
  c.budgeted = true;
  check_case(c, any_plan);
}

// 64-token stripes: CP rank 1 holds no token of most micro-batches, so its TP ranks run
// the sequence-parallel collectives, the ring and MoBA's block means on zero rows.
TEST(ContextTensorParallel, CpRanksWithoutTokensEqualOneProcess) {
  Case c = cp_tp_case("cp2xtp2_empty_rank", 1, 1, 2, "striped", "moba", false, 6);
  c.cp_stripe_tokens = 64;
  check_case(c, any_plan);
}

TEST(ContextTensorParallel, PipelineTwoTimesCpTwoTimesTpTwoWithMobaEqualsOneProcess) {
  check_case(cp_tp_case("pp2xcp2xtp2_moba", 1, 2, 2, "striped", "moba", false, 5), [](const GlobalBatchPlan& plan) {
    EXPECT_GT(plan.ranks[0].size(), 2u) << "steady 1F1B phase: more micro-batches than stages";
  });
}

TEST(ContextTensorParallel, DataTwoTimesCpTwoTimesTpTwoEqualsOneProcess) {
  check_case(cp_tp_case("dp2xcp2xtp2", 2, 1, 2, "zigzag", "dense", false, 8), [](const GlobalBatchPlan& plan) {
    const auto counts = microbatch_counts(plan);
    EXPECT_NE(counts[0], counts[1]) << "DP ranks should train different micro-batch counts";
  });
}

// Checkpoints are unsharded (HF layout) whatever the TP degree: one saved by two TP ranks
// after a training step loads into the plain one-process model, whose logits equal
// those the two ranks compute (their vocabulary columns put together). With LoRA the
// adapters are folded into their split projections before the shards are gathered.
void expect_tp_checkpoint_gives_the_same_logits(const Case& c) {
  const fs::path dir = test::fresh_temp_dir("pp_" + c.name);
  run_workers("checkpoint", c, dir);
  if (::testing::Test::HasFatalFailure()) return;
  const fs::path saved = dir / "run" / "checkpoints" / "iter_00000001";
  ASSERT_TRUE(fs::exists(saved / "config.json")) << saved;
  Qwen2ForCausalLM model = qwen2_load_hf_model(saved, dense_attention_options().make_backend());
  model->eval();
  const Manifest m = parse_manifest(case_manifest(c), c.name);
  const SyntheticDataset data(m.data.synthetic, m.seed);
  const std::vector<Sample> batch = data.global_batch(1, m.train.global_batch_size);
  std::vector<const Sample*> all;
  for (const Sample& s : batch) all.push_back(&s);
  const PackedMicroBatch packed = pack_microbatch(all);
  at::Tensor expected;
  {
    c10::NoGradGuard no_grad;
    expected = model->forward(packed.tokens, packed.position_ids, packed.sequences);
  }
  std::vector<at::Tensor> columns;
  for (int64_t r = 0; r < c.tp; ++r) {
    columns.push_back(SafetensorsFile::open(dir / ("logits-rank" + std::to_string(r) + ".safetensors")).tensor("logits"));
  }
  const at::Tensor logits = at::cat(columns, 1);
  ASSERT_EQ(logits.sizes(), expected.sizes());
  const double diff = (logits - expected).abs().max().item<double>();
  std::cout << "[" << c.name << "] largest logit difference, TP " << c.tp << " ranks vs the checkpoint at TP 1: " << diff << "\n";
  EXPECT_LE(diff, 1e-5);
  // Non-vacuous: the step changed the weights (the seeded initial model gives other logits).
  at::manual_seed(static_cast<uint64_t>(m.seed));
  Qwen2ForCausalLM initial(qwen2_preset(m.model.preset), dense_attention_options().make_backend());
  c10::NoGradGuard no_grad;
  EXPECT_GT((initial->forward(packed.tokens, packed.position_ids, packed.sequences) - expected).abs().max().item<double>(), 1e-3);
  fs::remove_all(dir);
}

TEST(TensorParallel, CheckpointSavedAtTpTwoLoadsAtTpOneWithTheSameLogits) {
  expect_tp_checkpoint_gives_the_same_logits(tp_case("tp2_checkpoint", 1, 1, 2, 6, "dense", false));
}

TEST(TensorParallel, LoraCheckpointSavedAtTpTwoLoadsAtTpOneWithTheSameLogits) {
  expect_tp_checkpoint_gives_the_same_logits(tp_case("tp2_lora_checkpoint", 1, 1, 2, 6, "dense", true));
}

TEST(PipelineParallel, BudgetsReachEveryStageAndStatisticsReachTheRecord) {
  const Case c{"stats_pp2_dp2", 2, 2, "qwen2-tiny", 6, {}};
  const fs::path dir = test::fresh_temp_dir("pp_stats");
  const Oracle oracle = one_process_oracle(c);
  run_workers("record", c, dir);
  if (HasFatalFailure()) return;
  // Every stage of DP rank d saw the requests of d's micro-batches: budget 2 + 3 d + j for
  // each of the micro-batch's sequences, once before its forward (in order) and once
  // more before its backward (a checkpointed layer runs its attention again there).
  for (int64_t rank = 0; rank < 4; ++rank) {
    const int64_t d = rank / 2;
    const json requests = json::parse(read_file(dir / ("requests-rank" + std::to_string(rank) + ".json")));
    const auto& planned = oracle.plan.ranks[static_cast<size_t>(d)];
    ASSERT_EQ(requests.size(), 2 * planned.size()) << "rank " << rank;
    std::vector<std::vector<int64_t>> first_seen;
    std::map<std::vector<int64_t>, int> times;
    for (const json& r : requests) {
      const auto budgets = r.get<std::vector<int64_t>>();
      if (times[budgets]++ == 0) first_seen.push_back(budgets);
    }
    ASSERT_EQ(first_seen.size(), planned.size()) << "rank " << rank;
    for (size_t j = 0; j < planned.size(); ++j) {
      const std::vector<int64_t> expected(planned[j].samples.size(), static_cast<int64_t>(2 + 3 * d + j));
      EXPECT_EQ(first_seen[j], expected);
      EXPECT_EQ(times[expected], 2);
    }
  }
  const json record = json::parse(read_file(dir / "record.json"));
  std::vector<int64_t> budgets;
  std::vector<double> predicted;
  for (size_t d = 0; d < 2; ++d) {
    for (size_t j = 0; j < oracle.plan.ranks[d].size(); ++j) {
      budgets.push_back(static_cast<int64_t>(2 + 3 * d + j));
      predicted.push_back(static_cast<double>(oracle.plan.ranks[d][j].tokens) / 10.0);
    }
  }
  EXPECT_EQ(record["budgets"].get<std::vector<int64_t>>(), budgets);
  EXPECT_EQ(record["microbatch_pred_ms"].get<std::vector<double>>(), predicted);
  const auto layer_coverage = record["layer_coverage"].get<std::vector<std::vector<double>>>();
  const auto layer_budgets = record["layer_budgets"].get<std::vector<std::vector<double>>>();
  const auto coverage = record["coverage"].get<std::vector<double>>();
  ASSERT_EQ(layer_coverage.size(), budgets.size());
  for (size_t k = 0; k < budgets.size(); ++k) {
    ASSERT_EQ(layer_coverage[k].size(), 4u) << "layers 0-1 from stage 0 and 2-3 from stage 1";
    double mean = 0;
    for (int64_t l = 0; l < 4; ++l) {
      const double expected = test::RecordingAttentionBackend::expected_coverage(l, budgets[k]);
      EXPECT_DOUBLE_EQ(layer_coverage[k][static_cast<size_t>(l)], expected);
      EXPECT_DOUBLE_EQ(layer_budgets[k][static_cast<size_t>(l)], static_cast<double>(budgets[k]));
      mean += expected / 4;
    }
    EXPECT_NEAR(coverage[k], mean, 1e-15);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sb
