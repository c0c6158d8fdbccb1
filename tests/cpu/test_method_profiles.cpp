// Latency profiles named by methods: the default grid `run` measures on first use, the
// check that a profile belongs to the run, and the message under torchrun.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <sstream>

#include "common/errors.h"
#include "harness/latency/analytic_profile.h"
#include "harness/latency/run_profiles/method_profiles.h"
#include "models/qwen2/qwen2_config.h"
#include "models/qwen2/qwen2_hf_config.h"
#include "tests/support/run_command.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_pattern.h"
#include "harness/patterns/attention_patterns.h"
#include "kernels/attention/patterns/moba/moba_pattern.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A one-method manifest: qwen2-test, MoBA blocks of 32, top_k 4, the given budget
// policy, lengths 40..500, profile at `profile`.
Manifest manifest_with(const std::string& budget, const fs::path& profile, const std::string& device = "cpu") {
  json j = {{"name", "m"},
            {"model", {{"preset", "qwen2-test"}}},
            {"data",
             {{"source", "synthetic"},
              {"synthetic",
               {{"length_mixture", json::array({{{"weight", 1.0}, {"min_tokens", 40}, {"max_tokens", 500}}})}}}}},
            {"train", {{"device", device}, {"iterations", 4}, {"max_tokens_per_microbatch", 512}}},
            {"methods",
             json::array({{{"name", "x"},
                           {"attention", {{"name", "moba"}, {"block_size", 32}, {"top_k", 4}}},
                           {"batching", "sab"},
                           {"budget", budget},
                           {"profile", profile.string()}}})}};
  return parse_manifest(j, "<test>");
}

TEST(MethodProfiles, DefaultGridSpansTheDataAndTheBudgetsThePoliciesAsk) {
  const Manifest m = manifest_with("dst", "/tmp/unused.json");
  const ProfileRequest request = default_profile_request(m, m.methods[0], 500);
  // Lengths double from max(16, 512 / 128) to the first power of two >= 500.
  EXPECT_EQ(request.seq_lens, (std::vector<int64_t>{16, 32, 64, 128, 256, 512}));
  // Budgets double from 1 to the 16 blocks of 500 tokens; top_k 4 and k_max 8 included.
  EXPECT_EQ(request.budgets, (std::vector<int64_t>{1, 2, 4, 8, 16}));
  EXPECT_EQ(request.model, "qwen2-test");
  EXPECT_EQ(attention_to_json(request.attention).at("block_size"), 32);
  EXPECT_EQ(request.device, "cpu");

  // Long data: at most 8 lengths, the shortest dropped; odd budgets kept exactly.
  Manifest wide = manifest_with("fixed", "/tmp/unused.json");
  wide.methods[0].attention = moba_attention_options(attention_to_json(wide.methods[0].attention).at("block_size"), 5);
  const ProfileRequest r2 = default_profile_request(wide, wide.methods[0], 100000);
  EXPECT_EQ(r2.seq_lens.size(), 8u);  // 1024 .. 131072 (131072 / 128 = 1024)
  EXPECT_EQ(r2.seq_lens.front(), 1024);
  EXPECT_EQ(r2.seq_lens.back(), 131072);
  EXPECT_NE(std::find(r2.budgets.begin(), r2.budgets.end(), 5), r2.budgets.end());
  EXPECT_EQ(r2.budgets.back(), (100000 + 31) / 32);
}

TEST(MethodProfiles, CommandLineMeasuresTheSameGrid) {
  const Manifest m = manifest_with("fixed", "/tmp/p.json");
  const ProfileRequest request = default_profile_request(m, m.methods[0], 500);
  EXPECT_EQ(profile_command_line(request, "/tmp/p.json"),
            "sparsebalance profile --model qwen2-test --attention moba --block 32 --device cpu --precision fp32 "
            "--seq-lens 16,32,64,128,256,512 --budgets 1,2,4,8,16 --seed 1234 --out /tmp/p.json");
  // Warm-up, repetitions and the seed (the manifest's) other than the defaults are part of the command.
  ProfileRequest more = request;
  more.warmup = 3;
  more.repetitions = 10;
  const std::string line = profile_command_line(more, "/tmp/p.json");
  EXPECT_NE(line.find(" --budgets 1,2,4,8,16 --warmup 3 --repetitions 10 --seed 1234 --out /tmp/p.json"), std::string::npos) << line;
  // The threads the profile is measured with (a rank's, on first use) too.
  const std::string threaded = profile_command_line(more, "/tmp/p.json", 2);
  EXPECT_NE(threaded.find(" --repetitions 10 --seed 1234 --threads 2 --out /tmp/p.json"), std::string::npos) << threaded;
}

LatencyProfile analytic_for(const std::string& preset, int64_t block);

TEST(MethodProfiles, VerticalSlashGridIsKeptKeysPerQueryAndItsCommandLineNamesThePattern) {
  Manifest m = manifest_with("dst", "/tmp/p.json");
  MethodSection& method = m.methods[0];
  VerticalSlashOptions vs;
  vs.params.block_size = 16;
  vs.params.last_queries = 32;
  vs.expected_keys = 100;
  method.attention = vertical_slash_attention_options(vs);
  const ProfileRequest request = default_profile_request(m, method, 500);
  // Powers of two from 64 below the dense mean of 500 tokens (251), that mean, and the
  // estimators' prior 100.
  EXPECT_EQ(request.budgets, (std::vector<int64_t>{64, 100, 128, 251}));
  EXPECT_EQ(profile_command_line(request, "/tmp/p.json"),
            "sparsebalance profile --model qwen2-test --attention vertical_slash --block 16 --last-queries 32 "
            "--device cpu --precision fp32 --seq-lens 16,32,64,128,256,512 --budgets 64,100,128,251 --seed 1234 --out /tmp/p.json");

  // A profile of the pattern serves the method only with its block size and index queries.
  LatencyProfile profile = analytic_for("qwen2-test", 16);  // a grid to stand in for one measured
  profile.attention = "vertical_slash";
  profile.device = "cpu";
  profile.attention_fields["last_queries"] = 32;
  profile.attention_fields["sink_tokens"] = 30;  // the method's (the defaults)
  profile.attention_fields["local_window"] = 100;
  profile.attention_fields["max_verticals"] = 4096;
  profile.attention_fields["max_slashes"] = 4096;
  EXPECT_NO_THROW(check_profile_matches(profile, m, method, "$.methods[0].profile"));
  const auto refused_with = [&](LatencyProfile other, const std::string& words) {
    try {
      check_profile_matches(other, m, method, "$.methods[0].profile");
      ADD_FAILURE() << "accepted a profile that differs in " << words;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  LatencyProfile other = profile;
  other.attention_fields["last_queries"] = 64;
  refused_with(other, "vertical-slash last_queries 64, not 32");
  other = profile;
  other.attention_fields["local_window"] = 50;
  refused_with(other, "local_window 50, not 100");
  other = profile;
  other.attention_fields["block_size"] = 64;
  refused_with(other, "vertical-slash blocks of 64 tokens, not 16");
}

LatencyProfile analytic_for(const std::string& preset, int64_t block) {
  return make_analytic_profile(qwen2_preset(preset), MobaPattern(MobaOptions{block, 32}), {64, 128}, {1, 2},
                               device_throughput_preset("h200"));
}

std::string refusal_of(const LatencyProfile& profile, const Manifest& m);

TEST(MethodProfiles, ProfileOfAnotherSetupIsRefusedNamingWhatDiffers) {
  const Manifest m = manifest_with("fixed", "/tmp/p.json");
  LatencyProfile ok = analytic_for("qwen2-test", 32);
  ok.device = "cpu";
  EXPECT_NO_THROW(check_profile_matches(ok, m, m.methods[0], "$.methods[0].profile"));

  auto expect_refused = [&](const LatencyProfile& p, const std::string& words) {
    try {
      check_profile_matches(p, m, m.methods[0], "$.methods[0].profile");
      ADD_FAILURE() << "accepted a profile that differs in " << words;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("$.methods[0].profile"), std::string::npos) << e.what();
    }
  };
  LatencyProfile other_model = analytic_for("qwen2-tiny", 32);
  other_model.device = "cpu";
  expect_refused(other_model, "qwen2-tiny");
  LatencyProfile other_block = analytic_for("qwen2-test", 64);
  other_block.device = "cpu";
  expect_refused(other_block, "blocks of 64");
  LatencyProfile on_gpu = ok;
  on_gpu.device = "cuda";
  expect_refused(on_gpu, "measured on cuda");
  // A profile of the token gate does not serve the block gate, nor the other way round;
  // a profile without the field (measured before the token gate existed) is the block gate's.
  LatencyProfile token = ok;
  token.attention_fields["token_gate"] = 1;
  expect_refused(token, "measured with MoBA's token gate, not its block gate ($.methods[].attention.gate)");
  Manifest token_run = m;
  MobaOptions options;
  options.block_size = 32;
  options.top_k = 4;
  options.gate = MobaGate::kToken;
  token_run.methods[0].attention = moba_attention_options(options);
  EXPECT_EQ(refusal_of(token, token_run), "");
  EXPECT_NE(refusal_of(ok, token_run).find("measured with MoBA's block gate, not its token gate"), std::string::npos)
      << refusal_of(ok, token_run);
  LatencyProfile without_field = ok;
  without_field.attention_fields.erase("token_gate");
  EXPECT_EQ(refusal_of(without_field, m), "");
}

// check_profile_matches's verdict: "" when accepted, else the error's text.
std::string refusal_of(const LatencyProfile& profile, const Manifest& m) {
  try {
    check_profile_matches(profile, m, m.methods[0], "$.methods[0].profile");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

Manifest with_train(Manifest m, const std::function<void(TrainSection&)>& edit) {
  edit(m.train);
  return m;
}

LoraSection lora(int64_t rank, std::vector<std::string> targets, double alpha = 16, double dropout = 0.05) {
  return LoraSection{rank, alpha, dropout, std::move(targets)};
}

TEST(MethodProfiles, TrainingOptionsOfAnotherSetupAreRefusedNamingBothValuesAndTheFix) {
  const Manifest fp32 = manifest_with("fixed", "/tmp/p.json");
  LatencyProfile profile = analytic_for("qwen2-test", 32);
  profile.device = "cpu";
  ASSERT_EQ(refusal_of(profile, fp32), "");

  // Every refusal names the manifest's JSON path, the profile file, both values and the fix.
  const auto expect_refused = [](const std::string& what, const std::vector<std::string>& words) {
    ASSERT_NE(what, "") << "accepted; expected a refusal naming " << words.front();
    for (const std::string& w : std::vector<std::string>{"$.methods[0].profile", "/tmp/p.json was measured",
                                                          "delete /tmp/p.json so that `sparsebalance run` measures it again"}) {
      EXPECT_NE(what.find(w), std::string::npos) << "no \"" << w << "\" in: " << what;
    }
    for (const std::string& w : words) EXPECT_NE(what.find(w), std::string::npos) << "no \"" << w << "\" in: " << what;
  };

  // Precision.
  const Manifest bf16 = with_train(fp32, [](TrainSection& t) { t.precision = Qwen2Precision::kBFloat16Mixed; });
  expect_refused(refusal_of(profile, bf16), {"precision fp32", "trains in bf16-mixed", "$.train.precision"});
  LatencyProfile bf16_profile = profile;
  bf16_profile.training.precision = Qwen2Precision::kBFloat16Mixed;
  EXPECT_EQ(refusal_of(bf16_profile, bf16), "");
  expect_refused(refusal_of(bf16_profile, fp32), {"precision bf16-mixed", "trains in fp32"});

  // Activation checkpointing.
  const Manifest checkpointed = with_train(fp32, [](TrainSection& t) { t.activation_checkpointing = true; });
  expect_refused(refusal_of(profile, checkpointed),
                 {"measured without activation checkpointing", "trains with it", "$.train.activation_checkpointing"});
  LatencyProfile checkpointed_profile = profile;
  checkpointed_profile.training.activation_checkpointing = true;
  EXPECT_EQ(refusal_of(checkpointed_profile, checkpointed), "");
  expect_refused(refusal_of(checkpointed_profile, fp32), {"measured with activation checkpointing"});

  // LoRA: present or not, its rank and its targets; alpha, dropout and the targets'
  // order do not change the time.
  const Manifest lora_run = with_train(fp32, [](TrainSection& t) { t.lora = lora(8, {"v_proj", "q_proj"}); });
  expect_refused(refusal_of(profile, lora_run),
                 {"measured for full fine-tuning", "trains LoRA rank 8 on q_proj, v_proj", "$.train.lora"});
  LatencyProfile lora_profile = profile;
  lora_profile.training.lora = Qwen2LoraOptions{8, 32.0, 0.0, {"q_proj", "v_proj"}};
  EXPECT_EQ(refusal_of(lora_profile, lora_run), "");
  expect_refused(refusal_of(lora_profile, fp32), {"measured for LoRA rank 8 on q_proj, v_proj", "trains full fine-tuning"});
  const Manifest rank16 = with_train(fp32, [](TrainSection& t) { t.lora = lora(16, {"q_proj", "v_proj"}); });
  expect_refused(refusal_of(lora_profile, rank16), {"LoRA rank 8", "trains LoRA rank 16"});
  const Manifest more_targets =
      with_train(fp32, [](TrainSection& t) { t.lora = lora(8, {"q_proj", "k_proj", "v_proj", "o_proj"}); });
  expect_refused(refusal_of(lora_profile, more_targets), {"trains LoRA rank 8 on q_proj, k_proj, v_proj, o_proj"});
}

// Tensor parallelism: a TP run predicts with a profile of one TP rank's share of a layer,
// measured for its TP degree; the key round-trips and is left out at tp 1 (older files).
TEST(MethodProfiles, TensorParallelRunNeedsAProfileOfItsTpDegree) {
  const Manifest tp1 = manifest_with("fixed", "/tmp/p.json");
  Manifest tp2 = tp1;
  tp2.parallelism.tp = 2;
  LatencyProfile profile = analytic_for("qwen2-test", 32);
  profile.device = "cpu";
  ASSERT_EQ(refusal_of(profile, tp1), "");
  const std::string refused = refusal_of(profile, tp2);
  EXPECT_NE(refused.find("measured for one of 1 tensor-parallel ranks, but the run has tp 2 ($.parallelism.tp)"),
            std::string::npos) << refused;
  LatencyProfile rank_share = profile;
  rank_share.training.tensor_parallel = 2;
  EXPECT_EQ(refusal_of(rank_share, tp2), "");
  EXPECT_NE(refusal_of(rank_share, tp1), "");
  // The request `run` measures on first use, and its command line, carry the degree.
  const ProfileRequest request = default_profile_request(tp2, tp2.methods[0], 500);
  EXPECT_EQ(request.training.tensor_parallel, 2);
  EXPECT_NE(profile_command_line(request, "/tmp/p.json").find(" --tensor-parallel 2 "), std::string::npos);
  EXPECT_EQ(profile_command_line(default_profile_request(tp1, tp1.methods[0], 500), "/tmp/p.json").find("--tensor-parallel"),
            std::string::npos);
  // Timed with the run's TP collectives: Gloo on the CPU (the default there, so the command
  // line names none), NCCL between GPUs, Gloo where the ranks share GPUs.
  EXPECT_EQ(request.training.tensor_parallel_collectives, "gloo");
  EXPECT_EQ(profile_command_line(request, "/tmp/p.json").find("--collectives"), std::string::npos);
  Manifest gpus = manifest_with("fixed", "/tmp/p.json", "cuda");
  gpus.parallelism.tp = 2;
  EXPECT_EQ(default_profile_request(gpus, gpus.methods[0], 500).training.tensor_parallel_collectives, "nccl");
  gpus.train.collectives = TrainCollectives::kGloo;
  const ProfileRequest shared = default_profile_request(gpus, gpus.methods[0], 500);
  EXPECT_EQ(shared.training.tensor_parallel_collectives, "gloo");
  EXPECT_NE(profile_command_line(shared, "/tmp/p.json").find(" --collectives gloo "), std::string::npos);
  // A profile timed over other collectives is refused; one timed without them serves with
  // a warning that it under-predicts.
  rank_share.training.tensor_parallel_collectives = "nccl";
  EXPECT_NE(refusal_of(rank_share, tp2).find("was timed with nccl TP collectives, but the run's are gloo"),
            std::string::npos);
  rank_share.training.tensor_parallel_collectives = "gloo";
  EXPECT_EQ(refusal_of(rank_share, tp2), "");
  rank_share.kind = "measured";
  EXPECT_EQ(tensor_parallel_collectives_warning(rank_share, "p.json"), "");
  rank_share.training.tensor_parallel_collectives.clear();
  EXPECT_EQ(refusal_of(rank_share, tp2), "");
  EXPECT_NE(tensor_parallel_collectives_warning(rank_share, "p.json").find("without the TP collectives"),
            std::string::npos);
  // The JSON key: written only above 1, read back.
  EXPECT_EQ(latency_profile_training_to_json(rank_share.training).at("tensor_parallel"), 2);
  EXPECT_FALSE(latency_profile_training_to_json(profile.training).contains("tensor_parallel"));
  EXPECT_EQ(latency_profile_training_from_json(latency_profile_training_to_json(rank_share.training), "$.training", "f")
                .tensor_parallel,
            2);
  // One TP rank's share of the architecture: heads, MLP columns and vocabulary / tp.
  const Qwen2Config share = qwen2_tensor_parallel_rank_config(qwen2_preset("qwen2-test-kv4"), 4);
  EXPECT_EQ(share.num_attention_heads, 2);
  EXPECT_EQ(share.num_key_value_heads, 1);
  EXPECT_EQ(share.intermediate_size, 16);
  EXPECT_EQ(share.vocab_size, 32);  // ceil(125 / 4): the widest shard
  EXPECT_EQ(share.hidden_size, 32);
  EXPECT_THROW(qwen2_tensor_parallel_rank_config(qwen2_preset("qwen2-test"), 4), std::invalid_argument);  // 2 KV heads
}

TEST(MethodProfiles, ProfileWithoutTrainingKeyServesFullFineTuningAtItsPrecisionOnly) {
  LatencyProfile measured = analytic_for("qwen2-test", 32);
  measured.device = "cpu";
  json old = latency_profile_to_json(measured);
  old.erase("training");  // as profiles were written before the key existed
  const LatencyProfile profile = latency_profile_from_json(old, "/tmp/p.json");
  const Manifest full = manifest_with("fixed", "/tmp/p.json");
  EXPECT_EQ(refusal_of(profile, full), "");
  const std::string lora_refusal =
      refusal_of(profile, with_train(full, [](TrainSection& t) { t.lora = lora(8, {"q_proj", "v_proj"}); }));
  EXPECT_NE(lora_refusal.find("measured for full fine-tuning"), std::string::npos) << lora_refusal;
  EXPECT_NE(refusal_of(profile, with_train(full, [](TrainSection& t) { t.activation_checkpointing = true; })), "");

  old["context"]["precision"] = "bf16-mixed";
  const LatencyProfile bf16 = latency_profile_from_json(old, "/tmp/p.json");
  EXPECT_NE(refusal_of(bf16, full).find("precision bf16-mixed"), std::string::npos);
  EXPECT_EQ(refusal_of(bf16, with_train(full, [](TrainSection& t) { t.precision = Qwen2Precision::kBFloat16Mixed; })),
            "");
}

// A run that starts from a folder is keyed by its architecture: a profile measured for
// the preset of that architecture serves it, one of another architecture does not.
TEST(MethodProfiles, RunFromAFolderUsesAProfileOfThePresetWithItsArchitecture) {
  const fs::path dir = test::fresh_temp_dir("method_profiles_folder") / "tiny-qwen";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << qwen2_config_to_hf_json(qwen2_preset("qwen2-test")).dump(2);
  json j = manifest_with("fixed", "/tmp/p.json").source;
  j["model"] = {{"from", dir.string()}};
  const Manifest m = parse_manifest(j, "<test>");
  ASSERT_TRUE(m.model.preset.empty());

  LatencyProfile preset_profile = analytic_for("qwen2-test", 32);
  preset_profile.device = "cpu";
  EXPECT_EQ(refusal_of(preset_profile, m), "");
  LatencyProfile other = analytic_for("qwen2-tiny", 32);
  other.device = "cpu";
  const std::string refused = refusal_of(other, m);
  EXPECT_NE(refused.find("measured for model \"qwen2-tiny\""), std::string::npos) << refused;
  EXPECT_NE(refused.find("hidden_size 128 vs 32"), std::string::npos) << refused;
  EXPECT_NE(refused.find(dir.string()), std::string::npos) << "names the run's model: " << refused;

  // The request `run` measures names the folder; so does its command line.
  const ProfileRequest request = default_profile_request(m, m.methods[0], 500);
  EXPECT_EQ(request.model, dir.string());
  EXPECT_EQ(request.config.name, "tiny-qwen");
  EXPECT_EQ(request.config.hidden_size, 32);
  const std::string line = profile_command_line(request, "/tmp/p.json");
  EXPECT_NE(line.find("--model " + dir.string() + " "), std::string::npos) << line;

  // ... and the profile measured from it serves the preset's run, the other way round.
  ProfileRequest tiny = request;
  tiny.seq_lens = {16, 32};
  tiny.budgets = {1, 2};
  tiny.warmup = 0;
  tiny.repetitions = 1;
  LatencyProfile from_folder = measure_latency_profile(tiny);
  EXPECT_EQ(from_folder.model["from"], dir.string());
  EXPECT_EQ(refusal_of(from_folder, manifest_with("fixed", "/tmp/p.json")), "");
  fs::remove_all(dir.parent_path());
}

TEST(MethodProfiles, DefaultRequestAndItsCommandLineCarryTheTrainingOptions) {
  Manifest m = manifest_with("fixed", "/tmp/p.json");
  m.train.precision = Qwen2Precision::kBFloat16Mixed;
  m.train.activation_checkpointing = true;
  m.train.lora = lora(8, {"v_proj", "q_proj"}, 16, 0.05);
  const ProfileRequest request = default_profile_request(m, m.methods[0], 500);
  EXPECT_EQ(request.training.precision, Qwen2Precision::kBFloat16Mixed);
  EXPECT_TRUE(request.training.activation_checkpointing);
  ASSERT_TRUE(request.training.lora.has_value());
  EXPECT_EQ(request.training.lora->rank, 8);
  EXPECT_DOUBLE_EQ(request.training.lora->alpha, 16);
  EXPECT_DOUBLE_EQ(request.training.lora->dropout, 0.05);
  // In the model's layer order, whatever order the manifest lists them in.
  EXPECT_EQ(request.training.lora->target_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_EQ(profile_command_line(request, "/tmp/p.json"),
            "sparsebalance profile --model qwen2-test --attention moba --block 32 --device cpu --precision bf16-mixed "
            "--activation-checkpointing --lora-rank 8 --lora-alpha 16.0 --lora-targets q_proj,v_proj "
            "--lora-dropout 0.05 --seq-lens 16,32,64,128,256,512 --budgets 1,2,4,8,16 --seed 1234 --out /tmp/p.json");
  // A path a shell would split is quoted.
  ProfileRequest spaced = request;
  spaced.model = "/models/my qwen";
  const std::string line = profile_command_line(spaced, "/tmp/it's.json");
  EXPECT_NE(line.find("--model '/models/my qwen' "), std::string::npos) << line;
  EXPECT_NE(line.find("--out '/tmp/it'\\''s.json'"), std::string::npos) << line;
}

TEST(MethodProfiles, WarnsWhenAPackingRunUsesAProfileWithoutThePackedPoint) {
  Manifest m = manifest_with("fixed", "/tmp/p.json");  // no sample limit: micro-batches pack
  LatencyProfile old = analytic_for("qwen2-test", 32);
  old.kind = "measured";
  const std::string warning = packed_point_warning(old, m, "/tmp/p.json");
  EXPECT_NE(warning.find("/tmp/p.json has no packed micro-batch point"), std::string::npos) << warning;
  EXPECT_NE(warning.find("Delete the file"), std::string::npos) << warning;
  LatencyProfile current = old;
  current.packed_ms = latency_stat_from_samples({1.0});
  current.packed_count = 4;
  EXPECT_EQ(packed_point_warning(current, m, "/tmp/p.json"), "");
  EXPECT_EQ(packed_point_warning(analytic_for("qwen2-test", 32), m, "/tmp/p.json"), "") << "analytic: nothing to measure";
  m.train.max_samples_per_microbatch = 1;  // one sequence per micro-batch: the point is never used
  EXPECT_EQ(packed_point_warning(old, m, "/tmp/p.json"), "");
}

TEST(MethodProfiles, WarnsWhenTheGridStopsShortOfTheLongestSequence) {
  LatencyProfile measured = analytic_for("qwen2-test", 32);
  measured.kind = "measured";
  const int64_t top = measured.seq_lens.back();
  const std::string warning = grid_coverage_warning(measured, top + 1, "/tmp/p.json");
  EXPECT_NE(warning.find("/tmp/p.json timed sequences up to " + std::to_string(top) + " tokens"), std::string::npos)
      << warning;
  EXPECT_NE(warning.find("up to " + std::to_string(top + 1)), std::string::npos) << warning;
  EXPECT_EQ(grid_coverage_warning(measured, top, "/tmp/p.json"), "");
  EXPECT_EQ(grid_coverage_warning(analytic_for("qwen2-test", 32), top + 1, "/tmp/p.json"), "") << "analytic";
}

TEST(MethodProfiles, MissingProfileUnderTorchrunSaysHowToMeasureIt) {
  const fs::path dir = test::fresh_temp_dir("method_profiles_missing");
  const Manifest m = manifest_with("fixed", dir / "p.json");
  const std::vector<RunSpec> runs = expand_runs(m);
  std::ostringstream log;
  try {
    ensure_method_profiles(runs, false, log);
    ADD_FAILURE() << "a missing profile was accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("does not exist"), std::string::npos) << what;
    EXPECT_NE(what.find("sparsebalance profile --model qwen2-test"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(dir / "p.json"));
  fs::remove_all(dir);
}

TEST(MethodProfiles, MissingProfileIsMeasuredOnceThenReused) {
  const fs::path dir = test::fresh_temp_dir("method_profiles_measure");
  Manifest m = manifest_with("fixed", dir / "sub" / "p.json");
  // A short grid: lengths 40..60 -> seq_lens 16, 32, 64 and budgets 1, 2, 4.
  m.data.synthetic.length_mixture = {{1.0, 40, 60}};
  const std::vector<RunSpec> runs = expand_runs(m);
  std::ostringstream log;
  ensure_method_profiles(runs, true, log);
  ASSERT_TRUE(fs::exists(dir / "sub" / "p.json")) << log.str();
  EXPECT_NE(log.str().find("measuring the latency profile"), std::string::npos);
  const LatencyProfile measured = load_latency_profile(dir / "sub" / "p.json");
  EXPECT_EQ(measured.seq_lens, (std::vector<int64_t>{16, 32, 64}));
  // The whole model was timed too, at the method's k0 (4, on the grid), once per length.
  ASSERT_EQ(measured.model_ms.size(), 3u);
  EXPECT_EQ(measured.model_budget, 4);
  for (const LatencyStat& s : measured.model_ms) EXPECT_GT(s.median, 0.0);
  EXPECT_EQ(measured.budgets, (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(measured.kind, "measured");
  EXPECT_EQ(measured.context["measured_for"]["method"], "x");

  std::ostringstream again;
  ensure_method_profiles(runs, true, again);
  EXPECT_EQ(again.str().find("measuring"), std::string::npos) << again.str();
  ASSERT_NE(load_method_predictor(runs[0]), nullptr);
  fs::remove_all(dir);
}

// A CP run (without TP) predicts with a profile of whole CP micro-batches timed on its CP
// ranks: the request and its command line carry the layout; a profile of another layout
// is refused, a one-rank profile serves with a warning.
TEST(MethodProfiles, ContextParallelRunNeedsAProfileOfItsRingOrWarns) {
  Manifest cp2 = manifest_with("fixed", "/tmp/p.json");
  cp2.parallelism.cp = 2;
  cp2.parallelism.cp_layout = CpLayout{CpLayoutKind::kZigzag, 128};
  const ProfileRequest request = default_profile_request(cp2, cp2.methods[0], 500);
  EXPECT_EQ(request.training.context_parallel, 2);
  EXPECT_EQ(request.training.cp_layout.kind, CpLayoutKind::kZigzag);
  const std::string line = profile_command_line(request, "/tmp/p.json");
  EXPECT_NE(line.find(" --context-parallel 2 --cp-layout zigzag "), std::string::npos) << line;
  EXPECT_EQ(line.find("--cp-stripe-tokens"), std::string::npos) << "zigzag has no stripes: " << line;

  LatencyProfile profile = analytic_for("qwen2-test", 32);
  profile.device = "cpu";
  profile.kind = "measured";
  EXPECT_EQ(refusal_of(profile, cp2), "");  // one rank: allowed, with a warning
  EXPECT_NE(context_parallel_warning(profile, cp2, "p.json").find("2 CP ranks"), std::string::npos);
  profile.training.context_parallel = 2;
  profile.training.cp_layout = cp2.parallelism.cp_layout;
  EXPECT_EQ(refusal_of(profile, cp2), "");
  EXPECT_EQ(context_parallel_warning(profile, cp2, "p.json"), "");
  profile.training.cp_layout.kind = CpLayoutKind::kStriped;
  EXPECT_NE(refusal_of(profile, cp2).find("was timed on 2 CP ranks, striped by 128, but the run trains on 2 CP ranks, zigzag"),
            std::string::npos)
      << refusal_of(profile, cp2);
  // A flat ring is one inner ring of every rank, however it is written.
  profile.training.cp_layout = cp2.parallelism.cp_layout;
  profile.training.cp_inner = 2;
  EXPECT_EQ(refusal_of(profile, cp2), "");
  // Beside TP too, on the tp x cp ranks; a TP profile without CP serves with the warning.
  Manifest both = cp2;
  both.parallelism.tp = 2;
  const ProfileRequest both_request = default_profile_request(both, both.methods[0], 500);
  EXPECT_EQ(both_request.training.context_parallel, 2);
  EXPECT_EQ(both_request.training.tensor_parallel, 2);
  EXPECT_NE(profile_command_line(both_request, "/tmp/p.json").find(" --tensor-parallel 2 --context-parallel 2 "),
            std::string::npos);
  LatencyProfile tp_profile = analytic_for("qwen2-test", 32);
  tp_profile.kind = "measured";
  tp_profile.training.tensor_parallel = 2;
  const std::string warned = context_parallel_warning(tp_profile, both, "p.json");
  EXPECT_NE(warned.find("times one TP group running each micro-batch whole"), std::string::npos) << warned;
  EXPECT_NE(warned.find("2 CP ranks"), std::string::npos) << warned;
  // On GPUs the ring runs over NCCL, or over Gloo where the ranks share GPUs: the request
  // says which (the command line where it is not the device's default), and a profile
  // timed over the other is refused.
  Manifest gpus = cp2;
  gpus.train.device = TrainDevice::kCuda;
  const ProfileRequest nccl = default_profile_request(gpus, gpus.methods[0], 500);
  EXPECT_EQ(nccl.training.context_parallel_collectives, "nccl");
  EXPECT_EQ(profile_command_line(nccl, "/tmp/p.json").find("--collectives"), std::string::npos);
  gpus.train.collectives = TrainCollectives::kGloo;
  const ProfileRequest shared = default_profile_request(gpus, gpus.methods[0], 500);
  EXPECT_EQ(shared.training.context_parallel_collectives, "gloo");
  const std::string shared_line = profile_command_line(shared, "/tmp/p.json");
  EXPECT_NE(shared_line.find(" --context-parallel 2 --collectives gloo "), std::string::npos) << shared_line;
  LatencyProfile on_gpus = profile;
  on_gpus.device = "cuda";
  on_gpus.training.cp_inner = 0;
  on_gpus.training.context_parallel_collectives = "nccl";
  EXPECT_NE(refusal_of(on_gpus, gpus).find("was timed with its CP ring over nccl, but the run's ring runs over gloo"),
            std::string::npos)
      << refusal_of(on_gpus, gpus);
  on_gpus.training.context_parallel_collectives = "gloo";
  EXPECT_EQ(refusal_of(on_gpus, gpus), "");
}

// A TP run's missing profile is measured on its TP ranks together: the launcher it is
// given starts `sparsebalance profile --tensor-parallel 2` as two processes (here the
// built binary), and the profile records their Gloo collectives and the run it was
// measured for. Without a launcher it is a ConfigError with the command.
TEST(MethodProfiles, MissingTensorParallelProfileIsMeasuredOnItsTpRanks) {
  const fs::path dir = test::fresh_temp_dir("method_profiles_tp");
  Manifest m = manifest_with("fixed", dir / "p.json");
  m.parallelism.tp = 2;
  m.data.synthetic.length_mixture = {{1.0, 40, 60}};
  const std::vector<RunSpec> runs = expand_runs(m);
  std::ostringstream refused;
  try {
    ensure_method_profiles(runs, true, refused);
    ADD_FAILURE() << "a missing TP profile was measured without its ranks";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--tensor-parallel 2"), std::string::npos) << e.what();
  }
  std::vector<int64_t> launched;
  std::ostringstream log;
  ensure_method_profiles(runs, true, log, true,
                         [&](int64_t tp, const std::vector<std::string>& arguments, std::ostream& out) {
                           launched.push_back(tp);
                           std::string line = test::sparsebalance_binary();
                           for (const std::string& a : arguments) line += " '" + a + "'";
                           // Started as two ranks of a job by the CLI's own launcher.
                           const test::CommandResult r = test::run_command(line);
                           out << r.output;
                           return r.exit_code;
                         });
  ASSERT_EQ(launched, (std::vector<int64_t>{2})) << log.str();
  const LatencyProfile measured = load_latency_profile(dir / "p.json");
  EXPECT_EQ(measured.training.tensor_parallel, 2);
  EXPECT_EQ(measured.training.tensor_parallel_collectives, "gloo");
  EXPECT_EQ(measured.context["measured_for"]["method"], "x");
  EXPECT_NE(log.str().find("starting 2 ranks"), std::string::npos) << log.str();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sb
