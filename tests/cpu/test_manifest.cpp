// Manifest parsing: strict keys and types with JSON paths, filled defaults, the
// resolved manifest's round trip, and the checked-in manifests parse.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/config/manifest.h"
#include "harness/config/stored_manifest.h"
#include "harness/runner/run_preflight.h"
#include "models/qwen2/qwen2_hf_config.h"
#include "harness/latency/latency_profile.h"

#ifdef SB_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace sb {
namespace {

using nlohmann::json;

json minimal_manifest() {
  return json::parse(R"({
    "name": "t",
    "model": {"preset": "qwen2-test"},
    "data": {"synthetic": {"length_mixture": [{"min_tokens": 8, "max_tokens": 16}]}},
    "train": {"iterations": 3},
    "methods": [{"name": "dense"}]
  })");
}

std::string config_error_of(const json& j) {
  try {
    parse_manifest(j, "m.json");
  } catch (const ConfigError& e) {
    return e.json_path() + " | " + e.what();
  }
  return "";
}

TEST(Manifest, FillsDefaults) {
  Manifest m = parse_manifest(minimal_manifest(), "m.json");
  EXPECT_EQ(m.seed, 1234);
  EXPECT_EQ(m.data.source, DataSource::kSynthetic);
  EXPECT_EQ(m.data.synthetic.vocab_size, 128);  // qwen2-test's vocabulary
  EXPECT_EQ(m.train.global_batch_size, 8);
  EXPECT_EQ(m.methods.at(0).attention.name(), "dense");
  EXPECT_EQ(m.methods.at(0).batching, BatchingKind::kSequential);
  EXPECT_EQ(m.parallelism.dp, 1);
  EXPECT_EQ(m.train.lr_schedule, LrSchedule::kCosine);
  EXPECT_FALSE(m.train.activation_checkpointing);
  EXPECT_EQ(m.train.precision, Qwen2Precision::kFloat32);
  EXPECT_FALSE(m.train.lora.has_value());  // full fine-tuning
  EXPECT_EQ(m.parallelism.stage_layers, (std::vector<int64_t>{2}));  // qwen2-test: 2 layers
  EXPECT_DOUBLE_EQ(m.parallelism.timeout_s, 60.0);
  EXPECT_EQ(m.checkpoint.every_iterations, 100);
  EXPECT_EQ(m.checkpoint.keep_last, 1);
  EXPECT_FALSE(m.checkpoint.at_end);
  EXPECT_DOUBLE_EQ(m.checkpoint.write_timeout_s, 1800.0);
}


TEST(Manifest, TrainingOptionsAndLoraParseAndRoundTrip) {
  json j = minimal_manifest();
  j["train"]["lr_schedule"] = "constant";
  j["train"]["activation_checkpointing"] = true;
  j["train"]["precision"] = "bf16-mixed";
  j["train"]["lora"] = {{"rank", 32}, {"alpha", 64}, {"target_modules", {"q_proj", "down_proj"}}};
  const Manifest m = parse_manifest(j, "m.json");
  EXPECT_EQ(m.train.lr_schedule, LrSchedule::kConstant);
  EXPECT_TRUE(m.train.activation_checkpointing);
  EXPECT_EQ(m.train.precision, Qwen2Precision::kBFloat16Mixed);
  ASSERT_TRUE(m.train.lora.has_value());
  EXPECT_EQ(m.train.lora->rank, 32);
  EXPECT_DOUBLE_EQ(m.train.lora->alpha, 64.0);
  EXPECT_DOUBLE_EQ(m.train.lora->dropout, 0.0);  // default
  EXPECT_EQ(m.train.lora->target_modules, (std::vector<std::string>{"q_proj", "down_proj"}));

  const json resolved = manifest_to_json(m);
  EXPECT_EQ(resolved["train"]["lora"]["dropout"], 0.0);
  EXPECT_EQ(resolved["train"]["precision"], "bf16-mixed");
  EXPECT_EQ(manifest_to_json(parse_manifest(resolved, "resolved.json")), resolved);
  EXPECT_FALSE(manifest_to_json(parse_manifest(minimal_manifest(), "m.json"))["train"].contains("lora"));
}

TEST(Manifest, BadTrainingOptionsNameTheirPath) {
  struct Case {
    std::function<void(json&)> edit;
    std::string path;
    std::string mentions;
  };
  const json lora = {{"rank", 8}, {"alpha", 16}, {"dropout", 0.05}, {"target_modules", {"q_proj"}}};
  std::vector<Case> cases = {
      {[](json& j) { j["train"]["lr_schedule"] = "linear"; }, "$.train.lr_schedule", "constant"},
      {[](json& j) { j["train"]["precision"] = "fp16"; }, "$.train.precision", "bf16-mixed"},
      {[](json& j) { j["train"]["activation_checkpointing"] = 1; },
       "$.train.activation_checkpointing", "true or false"},
      {[&](json& j) { j["train"]["lora"] = lora; j["train"]["lora"]["rank"] = 0; },
       "$.train.lora.rank", ">= 1"},
      {[&](json& j) { j["train"]["lora"] = lora; j["train"]["lora"]["alpha"] = -1; },
       "$.train.lora.alpha", "> 0"},
      {[&](json& j) { j["train"]["lora"] = lora; j["train"]["lora"]["dropout"] = 1.0; },
       "$.train.lora.dropout", "[0, 1)"},
      {[&](json& j) { j["train"]["lora"] = lora; j["train"]["lora"].erase("alpha"); },
       "$.train.lora.alpha", "missing"},
      {[&](json& j) { j["train"]["lora"] = lora; j["train"]["lora"]["target_modules"] = json::array(); },
       "$.train.lora.target_modules", "gate_proj"},
      {[&](json& j) {
         j["train"]["lora"] = lora;
         j["train"]["lora"]["target_modules"] = {"q_proj", "qkv"};
       },
       "$.train.lora.target_modules[1]", "down_proj"},
      {[&](json& j) {
         j["train"]["lora"] = lora;
         j["train"]["lora"]["target_modules"] = {"v_proj", "v_proj"};
       },
       "$.train.lora.target_modules[1]", "twice"},
      {[&](json& j) { j["train"]["lora"] = lora; j["train"]["lora"]["target_modules"] = {3}; },
       "$.train.lora.target_modules[0]", "expected a string"},
      {[&](json& j) { j["train"]["lora"] = lora; j["train"]["lora"]["r"] = 8; },
       "$.train.lora.r", "allowed keys"},
  };
  for (const auto& c : cases) {
    json j = minimal_manifest();
    c.edit(j);
    const std::string msg = config_error_of(j);
    EXPECT_EQ(msg.rfind(c.path + " |", 0), 0u) << msg;
    EXPECT_NE(msg.find(c.mentions), std::string::npos) << msg;
  }
}


// train.device "cuda" parses and round-trips; what a CUDA run needs (CUDA kernels in the
// build, bf16 for MoBA, a visible GPU) is checked before training, naming the key.
TEST(Manifest, CudaDeviceIsCheckedBeforeTraining) {
  json j = minimal_manifest();
  j["train"]["device"] = "gpu";
  const std::string bad = config_error_of(j);
  EXPECT_EQ(bad.rfind("$.train.device |", 0), 0u) << bad;
  EXPECT_NE(bad.find("cuda"), std::string::npos) << bad;

  j["train"]["device"] = "cuda";
  j["methods"] = json::parse(R"([{"name": "moba", "attention": {"name": "moba", "block_size": 8, "top_k": 2}}])");
  const Manifest fp32 = parse_manifest(j, "m.json");
  EXPECT_EQ(fp32.train.device, TrainDevice::kCuda);
  EXPECT_EQ(manifest_to_json(fp32)["train"]["device"], "cuda");
  const auto runnable_error = [](const Manifest& m) -> std::string {
    try {
      check_runnable_by_trainer(m);
    } catch (const ConfigError& e) {
      return e.json_path() + " | " + e.what();
    }
    return "";
  };
#ifndef SB_WITH_CUDA
  EXPECT_NE(runnable_error(fp32).find("$.train.device | "), std::string::npos);
#else
  const std::string precision = runnable_error(fp32);
  EXPECT_EQ(precision.rfind("$.train.precision |", 0), 0u) << precision;
  EXPECT_NE(precision.find("bf16-mixed"), std::string::npos) << precision;

  j["train"]["precision"] = "bf16-mixed";
  const Manifest bf16 = parse_manifest(j, "m.json");
  if (c10::cuda::device_count() == 0) {
    const std::string none = runnable_error(bf16);
    EXPECT_EQ(none.rfind("$.train.device |", 0), 0u) << none;
    EXPECT_NE(none.find("no CUDA device"), std::string::npos) << none;
  } else {
    EXPECT_EQ(runnable_error(bf16), "");
  }
#endif
  j["train"]["device"] = "cpu";
  j["train"]["precision"] = "fp32";
  EXPECT_EQ(runnable_error(parse_manifest(j, "m.json")), "");
}

// "$.path | message" of what check_runnable_by_trainer refuses in manifest j, or "".
std::string trainer_refusal(const json& j) {
  try {
    check_runnable_by_trainer(parse_manifest(j, "m.json"));
  } catch (const ConfigError& e) {
    return e.json_path() + " | " + e.what();
  }
  return "";
}

// What the trainer refuses of a CUDA manifest once every setting is one it takes: only
// the machine's lack (no CUDA build, or no visible GPU), or nothing.
void expect_only_the_machine_refuses(const std::string& refusal) {
#ifndef SB_WITH_CUDA
  EXPECT_EQ(refusal.rfind("$.train.device |", 0), 0u) << refusal;
#else
  if (c10::cuda::device_count() == 0) {
    EXPECT_EQ(refusal.rfind("$.train.device |", 0), 0u) << refusal;
  } else {
    EXPECT_EQ(refusal, "");
  }
#endif
}

// Vertical-slash on CUDA runs on the fused block-sparse kernels: bf16-mixed and a head_dim
// of 64 or 128, each refused naming its key before the device is looked for.
TEST(Manifest, VerticalSlashOnCudaNeedsWhatTheFusedKernelsTake) {
  json j = minimal_manifest();
  j["train"]["device"] = "cuda";
  j["methods"] = json::parse(R"([{"name": "vs", "attention": {"name": "vertical_slash"}}])");
  const auto runnable_error = [&j] { return trainer_refusal(j); };
#ifndef SB_WITH_CUDA
  EXPECT_EQ(runnable_error().rfind("$.train.device |", 0), 0u);
#else
  const std::string precision = runnable_error();
  EXPECT_EQ(precision.rfind("$.train.precision |", 0), 0u) << precision;
  EXPECT_NE(precision.find("vertical_slash on CUDA"), std::string::npos) << precision;
  j["train"]["precision"] = "bf16-mixed";
  const std::string head_dim = runnable_error();  // qwen2-test: head_dim 8
  EXPECT_EQ(head_dim.rfind("$.methods[0].attention |", 0), 0u) << head_dim;
  EXPECT_NE(head_dim.find("head_dim is 8"), std::string::npos) << head_dim;
  j["model"] = {{"preset", "qwen2.5-0.5b"}};  // head_dim 64
  expect_only_the_machine_refuses(runnable_error());
#endif
}

// Context parallelism on CUDA runs the GPU ring on the fused block-sparse kernels:
// bf16-mixed, head_dim 64 or 128 and stripes of at least 64 tokens, each refused naming
// its key on any machine, before the device is looked for; dense, MoBA and vertical-slash
// all run there.
TEST(Manifest, ContextParallelOnCudaNeedsWhatTheGpuRingTakes) {
  json j = minimal_manifest();
  j["train"]["device"] = "cuda";
  j["parallelism"] = {{"cp", 2}};
  j["methods"] = json::parse(R"([{"name": "moba", "attention": {"name": "moba", "block_size": 8, "top_k": 2}}])");
  const auto runnable_error = [&j] { return trainer_refusal(j); };
  const std::string precision = runnable_error();
  EXPECT_EQ(precision.rfind("$.train.precision |", 0), 0u) << precision;
  EXPECT_NE(precision.find("GPU ring"), std::string::npos) << precision;
  j["train"]["precision"] = "bf16-mixed";
  const std::string head_dim = runnable_error();  // qwen2-test: head_dim 8
  EXPECT_EQ(head_dim.rfind("$.parallelism.cp |", 0), 0u) << head_dim;
  EXPECT_NE(head_dim.find("head_dim is 8"), std::string::npos) << head_dim;
  j["model"] = {{"preset", "qwen2.5-0.5b"}};  // head_dim 64
  j["parallelism"] = {{"cp", 2}, {"cp_layout", "striped"}, {"cp_stripe_tokens", 32}};
  const std::string stripes = runnable_error();
  EXPECT_EQ(stripes.rfind("$.parallelism.cp_stripe_tokens |", 0), 0u) << stripes;
  EXPECT_NE(stripes.find("is 32 with the striped layout on CUDA"), std::string::npos) << stripes;
  j["parallelism"]["cp_stripe_tokens"] = 64;
  j["methods"] = json::parse(R"([{"name": "dense", "attention": "dense"},
                                 {"name": "vs", "attention": {"name": "vertical_slash"}}])");
  expect_only_the_machine_refuses(runnable_error());  // what remains is the machine's
}

// train.collectives: "gloo" parses and is written to the resolved manifest; "auto" (the
// default) is not, so earlier runs' manifests resolve as before. CUDA ranks sharing GPUs
// are limited like CPU ranks (per core), not to one per visible GPU.
TEST(Manifest, CollectivesChooseWhetherCudaRanksMayShareAGpu) {
  json j = minimal_manifest();
  EXPECT_FALSE(manifest_to_json(parse_manifest(j, "m.json"))["train"].contains("collectives"));
  j["train"]["collectives"] = "nccl";
  const std::string bad = config_error_of(j);
  EXPECT_EQ(bad.rfind("$.train.collectives |", 0), 0u) << bad;
  EXPECT_NE(bad.find("gloo"), std::string::npos) << bad;

  j["train"]["collectives"] = "gloo";
  j["train"]["device"] = "cuda";
  j["train"]["precision"] = "bf16-mixed";
  j["parallelism"] = {{"dp", 2}, {"pp", 2}};
  const Manifest shared = parse_manifest(j, "m.json");
  EXPECT_TRUE(shared.train.gpus_shared());
  EXPECT_EQ(manifest_to_json(shared)["train"]["collectives"], "gloo");
  EXPECT_NO_THROW(check_local_world_fits(shared, 0));  // 4 ranks: within 4 per core

  j["train"]["collectives"] = "auto";
  const Manifest one_per_gpu = parse_manifest(j, "m.json");
  EXPECT_FALSE(one_per_gpu.train.gpus_shared());
  int64_t visible = 0;
#ifdef SB_WITH_CUDA
  visible = static_cast<int64_t>(c10::cuda::device_count());
#endif
  if (visible < 4) {
    try {
      check_local_world_fits(one_per_gpu, 0);
      ADD_FAILURE() << "4 NCCL ranks accepted with " << visible << " GPU(s)";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.json_path(), "$.parallelism");
      EXPECT_NE(std::string(e.what()).find("train.collectives \"gloo\""), std::string::npos) << e.what();
    }
  }
}

TEST(Manifest, ParallelismResolvesTheStageSplit) {
  json j = minimal_manifest();
  j["parallelism"] = {{"dp", 2}, {"pp", 2}, {"timeout_s", 5}};
  Manifest m = parse_manifest(j, "m.json");
  EXPECT_EQ(m.parallelism.stage_layers, (std::vector<int64_t>{1, 1}));
  EXPECT_DOUBLE_EQ(m.parallelism.timeout_s, 5.0);
  const json resolved = manifest_to_json(m);
  EXPECT_EQ(resolved["parallelism"]["stage_layers"], json::array({1, 1}));
  EXPECT_EQ(manifest_to_json(parse_manifest(resolved, "resolved.json")), resolved);
}

TEST(Manifest, ContextParallelismParsesResolvesAndChecks) {
  json j = minimal_manifest();
  j["parallelism"] = {{"dp", 2}, {"cp", 4}, {"cp_layout", "zigzag"}, {"cp_inner", 2}};
  const Manifest m = parse_manifest(j, "m.json");
  EXPECT_EQ(m.parallelism.cp, 4);
  EXPECT_EQ(m.parallelism.cp_layout.kind, CpLayoutKind::kZigzag);
  EXPECT_EQ(m.parallelism.cp_inner, 2);
  EXPECT_EQ(parallel_layout_of(m).world_size(), 8);
  const json resolved = manifest_to_json(m);
  EXPECT_EQ(resolved["parallelism"]["cp_layout"], "zigzag");
  EXPECT_EQ(manifest_to_json(parse_manifest(resolved, "resolved.json")), resolved);
  // Without CP the resolved manifest is what it was before the keys existed.
  EXPECT_FALSE(manifest_to_json(parse_manifest(minimal_manifest(), "m.json"))["parallelism"].contains("cp"));

  const auto error_of = [](const json& parallelism) {
    json bad = minimal_manifest();
    bad["parallelism"] = parallelism;
    return config_error_of(bad);
  };
  std::string msg = error_of({{"cp", 0}});
  EXPECT_EQ(msg.rfind("$.parallelism.cp |", 0), 0u) << msg;
  msg = error_of({{"cp", 4}, {"cp_inner", 3}});
  EXPECT_EQ(msg.rfind("$.parallelism.cp_inner |", 0), 0u) << msg;
  EXPECT_NE(msg.find("must divide cp"), std::string::npos) << msg;
  msg = error_of({{"cp", 2}, {"cp_layout", "ring"}});
  EXPECT_EQ(msg.rfind("$.parallelism.cp_layout |", 0), 0u) << msg;
  EXPECT_NE(msg.find("striped"), std::string::npos) << msg;
  msg = error_of({{"cp", 2}, {"cp_stripe_tokens", 0}});
  EXPECT_EQ(msg.rfind("$.parallelism.cp_stripe_tokens |", 0), 0u) << msg;
  // Parses, but the trainer refuses what the CPU ring cannot compute.
  json mixed = minimal_manifest();
  mixed["parallelism"] = {{"cp", 2}};
  mixed["train"]["precision"] = "bf16-mixed";
  try {
    check_runnable_by_trainer(parse_manifest(mixed, "m.json"));
    ADD_FAILURE() << "bf16-mixed with cp > 1 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.json_path(), "$.train.precision") << e.what();
  }
}

TEST(Manifest, UnknownKeyAtEveryLevelNamesItsPath) {
  struct Case {
    std::function<void(json&)> edit;
    std::string path;
  };
  std::vector<Case> cases = {
      {[](json& j) { j["nmae"] = "x"; }, "$.nmae"},
      {[](json& j) { j["train"]["lerning_rate"] = 1; }, "$.train.lerning_rate"},
      {[](json& j) { j["data"]["synthetic"]["length_mixture"][0]["mean"] = 3; },
       "$.data.synthetic.length_mixture[0].mean"},
      {[](json& j) { j["methods"][0]["budgett"] = "dst"; }, "$.methods[0].budgett"},
      {[](json& j) { j["model"]["path"] = "/x"; }, "$.model.path"},
      {[](json& j) { j["parallelism"]["cp_degree"] = 2; }, "$.parallelism.cp_degree"},
      {[](json& j) { j["checkpoint"]["every"] = 2; }, "$.checkpoint.every"},
  };
  for (const auto& c : cases) {
    json j = minimal_manifest();
    c.edit(j);
    std::string msg = config_error_of(j);
    EXPECT_EQ(msg.rfind(c.path + " |", 0), 0u) << msg;
    EXPECT_NE(msg.find("allowed keys"), std::string::npos) << msg;
  }
}

TEST(Manifest, WrongTypeNamesPathAndType) {
  json j = minimal_manifest();
  j["train"]["iterations"] = "3";
  std::string msg = config_error_of(j);
  EXPECT_EQ(msg.rfind("$.train.iterations |", 0), 0u) << msg;
  EXPECT_NE(msg.find("expected an integer"), std::string::npos) << msg;

  j = minimal_manifest();
  j["methods"] = json::object();
  msg = config_error_of(j);
  EXPECT_EQ(msg.rfind("$.methods |", 0), 0u) << msg;
}

TEST(Manifest, AFolderMustHaveThePresetsArchitectureRopeScalingAside) {
  const std::filesystem::path folder =
      std::filesystem::temp_directory_path() / ("sb_model_from_" + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  Qwen2Config config = qwen2_preset("qwen2-test");
  config.yarn = Qwen2YarnScaling{4.0, config.max_position_embeddings};  // as Qwen2.5's card extends it
  std::ofstream(folder / "config.json") << qwen2_config_to_hf_json(config).dump();
  json j = minimal_manifest();
  j["model"] = {{"preset", "qwen2-test"}, {"from", folder.string()}};
  const Manifest m = parse_manifest(j, "<test>");
  EXPECT_TRUE(m.model.config.yarn.has_value());  // the folder's scaling is kept
  EXPECT_EQ(m.model.base_weights(), folder.string());

  config.hidden_size *= 2;
  std::ofstream(folder / "config.json") << qwen2_config_to_hf_json(config).dump();
  const std::string msg = config_error_of(j);
  EXPECT_EQ(msg.rfind("$.model.from |", 0), 0u) << msg;
  EXPECT_NE(msg.find("hidden_size"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("rope_scaling"), std::string::npos) << msg;
  std::filesystem::remove_all(folder);
}

TEST(Manifest, RejectsInvalidValuesWithPath) {
  json j = minimal_manifest();
  j["model"]["preset"] = "qwen2.5-05b";
  std::string msg = config_error_of(j);
  EXPECT_EQ(msg.rfind("$.model.preset |", 0), 0u) << msg;
  EXPECT_NE(msg.find("qwen2.5-0.5b"), std::string::npos) << msg;  // lists the known presets

  j = minimal_manifest();
  j["methods"][0]["attention"] = "magic";
  msg = config_error_of(j);
  EXPECT_EQ(msg.rfind("$.methods[0].attention.name |", 0), 0u) << msg;

  j = minimal_manifest();
  j["methods"].push_back({{"name", "dense"}});
  msg = config_error_of(j);
  EXPECT_EQ(msg.rfind("$.methods[1].name |", 0), 0u) << msg;

  j = minimal_manifest();
  j["train"]["warmup_iterations"] = 3;
  msg = config_error_of(j);
  EXPECT_EQ(msg.rfind("$.train.warmup_iterations |", 0), 0u) << msg;

  j = minimal_manifest();
  j["data"]["synthetic"]["length_mixture"][0]["max_tokens"] = 4;
  msg = config_error_of(j);
  EXPECT_EQ(msg.rfind("$.data.synthetic.length_mixture[0].max_tokens |", 0), 0u) << msg;

  j = minimal_manifest();
  j["parallelism"] = {{"dp", 0}};
  msg = config_error_of(j);
  EXPECT_EQ(msg.rfind("$.parallelism.dp |", 0), 0u) << msg;

  j = minimal_manifest();
  // tp > 1 parses (only `simulate` runs it; tests/cpu/test_simulator.cpp); tp < 1 never does.
  j["parallelism"] = {{"dp", 2}, {"tp", 0}};
  msg = config_error_of(j);
  EXPECT_EQ(msg.rfind("$.parallelism.tp |", 0), 0u) << msg;
  EXPECT_NE(msg.find(">= 1"), std::string::npos) << msg;

  j = minimal_manifest();
  j["parallelism"] = {{"pp", 2}, {"stage_layers", {1, 2}}};  // the model has 2 layers
  msg = config_error_of(j);
  EXPECT_EQ(msg.rfind("$.parallelism.stage_layers |", 0), 0u) << msg;

  j = minimal_manifest();
  j["parallelism"] = {{"pp", 3}};
  msg = config_error_of(j);
  EXPECT_EQ(msg.rfind("$.parallelism.pp |", 0), 0u) << msg;

  j = minimal_manifest();
  j["checkpoint"] = {{"keep_last", 0}};
  msg = config_error_of(j);
  EXPECT_EQ(msg.rfind("$.checkpoint.keep_last |", 0), 0u) << msg;

  j = minimal_manifest();
  j["name"] = "../escape";
  msg = config_error_of(j);
  EXPECT_EQ(msg.rfind("$.name |", 0), 0u) << msg;
}

TEST(Manifest, DstRaiseRuleParsesAndIsWrittenOnlyWhenNotTheDefault) {
  json j = minimal_manifest();
  j["methods"][0] = {{"name", "x"}, {"preset", "dst"}, {"profile", "/p.json"},
                     {"attention", {{"name", "moba"}, {"block_size", 16}, {"top_k", 4}}}};
  const Manifest plain = parse_manifest(j, "m.json");
  EXPECT_EQ(plain.methods[0].dst.raise, DstRaiseRule::kAnchor);
  // Absent from the resolved JSON: results resolved before the key existed still match.
  EXPECT_FALSE(manifest_to_json(plain)["methods"][0]["dst"].contains("raise"));
  j["methods"][0]["dst"] = {{"raise", "dp_slack"}};
  const Manifest slack = parse_manifest(j, "m.json");
  EXPECT_EQ(slack.methods[0].dst.raise, DstRaiseRule::kDpSlack);
  EXPECT_EQ(manifest_to_json(slack)["methods"][0]["dst"]["raise"], "dp_slack");
  EXPECT_EQ(parse_manifest(manifest_to_json(slack), "r.json").methods[0].dst.raise, DstRaiseRule::kDpSlack);
  j["methods"][0]["dst"] = {{"raise", "always"}};
  const std::string msg = config_error_of(j);
  EXPECT_EQ(msg.rfind("$.methods[0].dst.raise |", 0), 0u) << msg;
}

TEST(Manifest, RoundTripThroughResolvedJson) {
  json j = minimal_manifest();
  j["methods"].push_back({{"name", "dense-2"}, {"batching", "sequential"}});
  j["train"]["lr"] = 0.01;
  const Manifest m = parse_manifest(j, "m.json");
  const json resolved = manifest_to_json(m);
  const Manifest again = parse_manifest(resolved, "resolved.json");
  EXPECT_EQ(manifest_to_json(again), resolved);
  EXPECT_DOUBLE_EQ(again.train.lr, 0.01);
  EXPECT_EQ(again.methods.size(), 2u);
  // Every default the parser filled is written out, so nothing is implicit.
  EXPECT_TRUE(resolved["train"].contains("adam_beta2"));
  EXPECT_EQ(resolved["data"]["synthetic"]["vocab_size"], 128);
}

TEST(Manifest, ExpandRunsNarrowsToOneMethodEach) {
  json j = minimal_manifest();
  j["methods"].push_back({{"name", "second"}});
  const auto runs = expand_runs(parse_manifest(j, "m.json"));
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[1].name, "second");
  ASSERT_EQ(runs[1].manifest.methods.size(), 1u);
  EXPECT_EQ(runs[1].manifest.methods[0].name, "second");
}

TEST(Manifest, LoadReportsJsonSyntaxErrorWithLine) {
  const auto path = std::filesystem::temp_directory_path() / "sb_bad_syntax.json";
  std::ofstream(path) << "{\n  \"name\": \"x\",\n  oops\n}\n";
  try {
    load_manifest(path);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string() + ":3:"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST(Manifest, CheckedInManifestsParse) {
  const std::filesystem::path root = SB_SOURCE_DIR "/experiments";
  int profiles = 0, measured = 0, paper = 0, later = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().string());
    // schema/ holds the JSON Schema; profiles/ latency profiles: those runs measure on first
    // use (git-ignored) and, in profiles/gpu/, those kept as data, which must load.
    // measured/ holds runs measured on an H100 and on this CPU, kept as data: their resolved
    // manifests and the profiles they used (the *-sim.json twins simulate with them) must load.
    const std::string top = std::filesystem::relative(entry.path(), root).begin()->string();
    if (top == "schema") continue;
    if (top == "measured") {
      if (entry.path().filename() == "manifest.resolved.json") {
        // Resolved again, the methods (attention patterns and their keys included) are the
        // file's as a rerun reads it (with the keys resolved manifests once left out,
        // stored_manifest.h): kept results still count as complete on a rerun.
        const nlohmann::json stored = read_stored_manifest_json(entry.path());
        EXPECT_EQ(manifest_to_json(load_stored_manifest(entry.path())).at("methods"), stored.at("methods"));
        ++measured;
      }
      if (entry.path().filename() == "profile.json") EXPECT_NO_THROW(load_latency_profile(entry.path()));
      continue;
    }
    if (top == "profiles") {
      if (entry.path().parent_path().filename() == "gpu") {
        EXPECT_NO_THROW(load_latency_profile(entry.path()));
        ++profiles;
      }
      continue;
    }
    const json raw = json::parse(read_file(entry.path()));
    // The paper's rows name placeholder folders for --set, and a manifest may fine-tune what
    // another one trains (dst-ablation.json, dst-ablation-base.json's checkpoint under
    // results/, absent in a fresh clone): give them a folder of the preset's architecture
    // (parsing reads config.json; tokenizer.json only has to exist).
    const bool later_checkpoint = raw["model"].contains("from") &&
                                  raw["model"]["from"].get<std::string>().rfind("../results/", 0) == 0;
    if (top == "paper" || later_checkpoint) {
      const std::string preset = raw["model"]["preset"];
      const std::filesystem::path folder =
          std::filesystem::temp_directory_path() / ("sb_paper_" + std::to_string(::getpid())) / preset;
      std::filesystem::create_directories(folder);
      std::ofstream(folder / "config.json") << qwen2_config_to_hf_json(qwen2_preset(preset)).dump();
      std::ofstream(folder / "tokenizer.json") << "{}";
      EXPECT_NO_THROW(load_manifest(entry.path(), {parse_manifest_override("model.from=" + folder.string())}));
      paper += top == "paper" ? 1 : 0;
      later += later_checkpoint ? 1 : 0;
      continue;
    }
    EXPECT_NO_THROW(load_manifest(entry.path()));
  }
  EXPECT_EQ(paper, 7) << "experiments/paper/ holds the paper's six end-to-end rows and its 32-GPU layout "
                         "(paper-3b-chatqa2-32gpu.json)";
  EXPECT_EQ(later, 1) << "dst-ablation.json fine-tunes dst-ablation-base.json's checkpoint";
  EXPECT_GE(profiles, 1) << "experiments/profiles/gpu/ holds the H100 profile table1-gpu1.json names";
  EXPECT_GE(measured, 4 + 12 + 12) << "experiments/measured/ holds table1-gpu1's runs (h100/) and two invocations of "
                                     "table1-cpu (cpu/), which table1-gpu1-sim.json and table1-cpu-sim.json fit to";
}

}  // namespace
}  // namespace sb
