// A latency profile's training key (precision, activation checkpointing, LoRA) in the
// profile file, the model a profile request names (a preset or a Hugging Face folder),
// and the profiler timing the layer the way the run trains it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <string>
#include <vector>

#include "common/errors.h"
#include "harness/latency/latency_profile.h"
#include "harness/latency/latency_profiler.h"
#include "harness/latency/run_profiles/tensor_parallel_profile_peers.h"
#include "harness/parallel/process_group.h"
#include "kernels/attention/ring/ring_attention.h"
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include "models/qwen2/qwen2_config.h"
#include "models/qwen2/qwen2_hf_config.h"
#include "models/qwen2/qwen2_model.h"
#include "tests/support/run_command.h"
#include "tests/support/tensor_parallel_threads.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"
#include "kernels/attention/patterns/moba/moba_pattern.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A Hugging Face folder holding only the config.json of `preset`'s architecture (the
// profiler needs no weights: it times randomly initialised layers).
fs::path folder_of(const std::string& preset, const std::string& name) {
  const fs::path dir = test::fresh_temp_dir(name) / "Qwen2-Folder";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << qwen2_config_to_hf_json(qwen2_preset(preset)).dump(2);
  return dir;
}

LatencyProfile small_profile() {
  LatencyProfile p;
  p.model = latency_profile_model_json(qwen2_preset("qwen2-test"));
  p.attention = "moba";
  p.attention_fields["block_size"] = 8;
  p.seq_lens = {16, 32};
  p.budgets = {1, 2};
  for (int i = 0; i < 2; ++i) {
    p.layer_ms.push_back({latency_stat_from_samples({1.0 + i}), latency_stat_from_samples({2.0 + i})});
    p.rest_ms.push_back(latency_stat_from_samples({0.5}));
    p.head_ms.push_back(latency_stat_from_samples({0.25}));
  }
  return p;
}

Qwen2LoraOptions lora_on_q_and_v() { return Qwen2LoraOptions{4, 8.0, 0.1, {"q_proj", "v_proj"}}; }

// A request on a tiny grid, measured in a blink.
ProfileRequest tiny_request(const std::string& model) {
  ProfileRequest request;
  request.model = model;
  request.config = profile_model_config(model);
  request.attention = moba_attention_options(8, 2);
  request.seq_lens = {16, 32, 64};
  request.budgets = {1, 2, 4};
  request.warmup = 0;
  request.repetitions = 1;
  return request;
}

int64_t parameter_count(torch::nn::Module& module) {
  int64_t n = 0;
  for (const at::Tensor& p : module.parameters()) n += p.numel();
  return n;
}

TEST(LatencyProfileTraining, RoundTripsThroughTheProfileFile) {
  LatencyProfile p = small_profile();
  p.training.precision = Qwen2Precision::kBFloat16Mixed;
  p.training.activation_checkpointing = true;
  p.training.lora = lora_on_q_and_v();
  const json j = latency_profile_to_json(p);
  EXPECT_EQ(j["training"], json::parse(R"({"precision": "bf16-mixed", "activation_checkpointing": true,
      "lora": {"rank": 4, "alpha": 8.0, "dropout": 0.1, "target_modules": ["q_proj", "v_proj"]}})"));

  const fs::path dir = test::fresh_temp_dir("profile_training_round_trip");
  save_latency_profile(p, dir / "p.json");
  const LatencyProfile back = load_latency_profile(dir / "p.json");
  EXPECT_EQ(back.training.precision, Qwen2Precision::kBFloat16Mixed);
  EXPECT_TRUE(back.training.activation_checkpointing);
  ASSERT_TRUE(back.training.lora.has_value());
  EXPECT_EQ(back.training.lora->rank, 4);
  EXPECT_DOUBLE_EQ(back.training.lora->alpha, 8.0);
  EXPECT_DOUBLE_EQ(back.training.lora->dropout, 0.1);
  EXPECT_EQ(back.training.lora->target_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_EQ(latency_profile_to_json(back), j);

  // Full fine-tuning writes "lora": null and reads back without adapters.
  LatencyProfile full = small_profile();
  EXPECT_TRUE(latency_profile_to_json(full)["training"]["lora"].is_null());
  const LatencyProfile full_back = latency_profile_from_json(latency_profile_to_json(full), "<test>");
  EXPECT_FALSE(full_back.training.lora.has_value());
  EXPECT_EQ(full_back.training.precision, Qwen2Precision::kFloat32);
  EXPECT_FALSE(full_back.training.activation_checkpointing);
  EXPECT_EQ(latency_profile_training_text(p.training),
            "bf16-mixed, activation checkpointing, LoRA rank 4 on q_proj, v_proj");
  fs::remove_all(dir);
}

TEST(LatencyProfileTraining, ProfilesWrittenBeforeTheKeyReadAsTheyWereMeasured) {
  json old = latency_profile_to_json(small_profile());
  old.erase("training");
  const LatencyProfile fp32 = latency_profile_from_json(old, "<old>");
  EXPECT_EQ(fp32.training.precision, Qwen2Precision::kFloat32);
  EXPECT_FALSE(fp32.training.activation_checkpointing);
  EXPECT_FALSE(fp32.training.lora.has_value());

  old["context"]["precision"] = "bf16-mixed";  // what the profiler recorded before the key
  EXPECT_EQ(latency_profile_from_json(old, "<old>").training.precision, Qwen2Precision::kBFloat16Mixed);
  old["context"]["precision"] = "fp8";
  try {
    latency_profile_from_json(old, "<old>");
    ADD_FAILURE() << "an unknown precision in the context was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("$.context.precision"), std::string::npos) << e.what();
  }

  // The kept profiles still load, as the training they were measured with.
  // (A kept run's profile: experiments/profiles/*.json are measured on first use, not in git.)
  const LatencyProfile cpu =
      load_latency_profile(SB_SOURCE_DIR "/experiments/measured/cpu/table1-cpu-rerun/baseline__seed=1/profile.json");
  EXPECT_EQ(cpu.training.precision, Qwen2Precision::kFloat32);
  EXPECT_FALSE(cpu.training.lora.has_value());
  const LatencyProfile gpu =
      load_latency_profile(SB_SOURCE_DIR "/experiments/profiles/gpu/h100-qwen2.5-0.5b-moba256.json");
  EXPECT_EQ(gpu.training.precision, Qwen2Precision::kBFloat16Mixed);
  EXPECT_FALSE(gpu.training.activation_checkpointing);
  EXPECT_FALSE(gpu.training.lora.has_value());
}

TEST(LatencyProfileTraining, BadValuesAreErrorsNamingTheJsonPath) {
  const auto error_of = [](const std::function<void(json&)>& edit) -> std::string {
    LatencyProfile p = small_profile();
    p.training.lora = lora_on_q_and_v();
    json j = latency_profile_to_json(p);
    edit(j);
    try {
      latency_profile_from_json(j, "<bad>");
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_NE(error_of([](json& j) { j["training"]["precision"] = "fp16"; }).find("$.training.precision"),
            std::string::npos);
  EXPECT_NE(error_of([](json& j) { j["training"]["lora"]["target_modules"] = {"qkv"}; }).find("$.training.lora"),
            std::string::npos);
  EXPECT_NE(error_of([](json& j) { j["training"]["lora"]["rank"] = 0; }).find("$.training.lora"), std::string::npos);
  EXPECT_NE(error_of([](json& j) { j["training"]["lora"].erase("alpha"); }).find("$.training.lora.alpha"),
            std::string::npos);
  EXPECT_NE(error_of([](json& j) { j["training"]["mixed"] = true; }).find("$.training.mixed"), std::string::npos);
  // TP collectives: one of the two kinds, and only with tensor parallelism.
  EXPECT_NE(error_of([](json& j) {
              j["training"]["tensor_parallel"] = 2;
              j["training"]["tensor_parallel_collectives"] = "mpi";
            }).find("$.training.tensor_parallel_collectives"),
            std::string::npos);
  EXPECT_NE(error_of([](json& j) { j["training"]["tensor_parallel_collectives"] = "gloo"; })
                .find("$.training.tensor_parallel_collectives"),
            std::string::npos);
  LatencyProfile tp = small_profile();
  tp.training.tensor_parallel = 2;
  tp.training.tensor_parallel_collectives = "nccl";
  EXPECT_EQ(latency_profile_from_json(latency_profile_to_json(tp), "<tp>").training.tensor_parallel_collectives, "nccl");
  EXPECT_EQ(latency_profile_training_text(tp.training),
            "fp32, no activation checkpointing, full fine-tuning, one of 2 TP ranks with its nccl collectives");
  tp.training.tensor_parallel_collectives.clear();
  EXPECT_FALSE(latency_profile_to_json(tp)["training"].contains("tensor_parallel_collectives"));
}

TEST(ProfileModel, IsAPresetOrAFolderWithConfigJson) {
  EXPECT_FALSE(profile_model_is_folder("qwen2-test"));
  EXPECT_EQ(profile_model_config("qwen2-test").hidden_size, 32);

  const fs::path dir = folder_of("qwen2-test", "profile_model_folder");
  ASSERT_TRUE(profile_model_is_folder(dir.string()));
  const Qwen2Config folder = profile_model_config(dir.string());
  EXPECT_EQ(folder.name, "Qwen2-Folder");  // named after the folder, as the manifest names it
  EXPECT_EQ(latency_profile_architecture(latency_profile_model_json(folder)),
            latency_profile_architecture(latency_profile_model_json(qwen2_preset("qwen2-test"))));
  EXPECT_EQ(profile_model_config(dir.string() + "/").name, "Qwen2-Folder");

  try {
    profile_model_config("qwen2-nonexistent");
    ADD_FAILURE() << "an unknown model was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("qwen2-test"), std::string::npos) << "lists the presets: " << e.what();
  }
  fs::remove(dir / "config.json");
  try {
    profile_model_config(dir.string());
    ADD_FAILURE() << "a folder without config.json was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("folder with config.json"), std::string::npos) << e.what();
  }
  fs::remove_all(dir.parent_path());
}

// Tensor parallelism: the profile times one TP rank's share of a layer (half the heads
// and MLP columns at tp 2), the parameters the timed layer reports say so, and the
// profile records the degree.
TEST(ProfileLayerBench, TensorParallelRequestTimesOneRanksShareOfTheLayer) {
  const Qwen2Config& config = qwen2_preset("qwen2-test-kv4");
  Qwen2DecoderLayer share(qwen2_tensor_parallel_rank_config(config, 2), 0);
  Qwen2DecoderLayer whole(config, 0);
  ProfileRequest request = tiny_request("qwen2-test-kv4");
  request.training.tensor_parallel = 2;
  const LatencyProfile profile = measure_latency_profile(request);
  EXPECT_EQ(profile.context["timed_layer"]["parameters"], parameter_count(*share));
  EXPECT_LT(parameter_count(*share), parameter_count(*whole));  // non-vacuous
  EXPECT_EQ(profile.training.tensor_parallel, 2);
  EXPECT_EQ(latency_profile_to_json(profile)["training"]["tensor_parallel"], 2);
}

// With its TP group the profile times the TP ranks' shares together, each with the
// collectives the trainer runs for it, counted by hand from Megatron's sequence
// parallelism: per layer 2 all-gathers and 2 reduce-scatters forward and as many
// backward (8); the head's all-gather (and its gradient's reduce-scatter) and the loss's
// 2 all-reduces (4); the whole model, L layers plus the embedding's reduce-scatter both
// ways and the head (8 L + 6: qwen2-tiny's 38, as the kept TP2 runs' `tp_comm` events
// count a micro-batch). Dense attention sums nothing over the heads. Every rank returns
// the same samples, the slowest rank's, and the profile names the collectives.
TEST(ProfileLayerBench, TensorParallelGroupTimesTheSharesWithTheTrainersCollectives) {
  const int64_t tp = 2;
  const Qwen2Config& config = qwen2_preset("qwen2-test");
  const int64_t layers = config.num_hidden_layers;
  Qwen2DecoderLayer share(qwen2_tensor_parallel_rank_config(config, tp), 0);
  std::vector<LatencyProfile> profiles(tp);
  std::vector<size_t> collectives(tp);
  test::run_tp_ranks(tp, [&](std::shared_ptr<TensorParallelGroup> group) {
    ProfileRequest request = tiny_request("qwen2-test");
    request.attention = dense_attention_options();
    request.budgets.clear();
    request.seq_lens = {16, 33};  // 33 rows: the last rank's share is padded
    request.training.tensor_parallel = tp;
    request.training.tensor_parallel_collectives = "gloo";
    request.tensor_parallel_peers = tensor_parallel_profile_peers(group, config.vocab_size, c10::kCPU);
    const int64_t r = group->rank();
    profiles[r] = measure_latency_profile(request);
    collectives[r] = group->take_intervals().size();
  });
  // Per length: layer 8, rest 8, head 4, model 8 L + 6; the packed layer 8; the probe of
  // what the timed layer is (a forward: 4); the all-reduce taking the slowest samples (1).
  const size_t per_length = 8 + 8 + 4 + (8 * layers + 6);
  EXPECT_EQ(collectives[0], 2 * per_length + 8 + 4 + 1);
  EXPECT_EQ(collectives[1], collectives[0]);
  for (const LatencyProfile& profile : profiles) {
    EXPECT_EQ(profile.training.tensor_parallel, tp);
    EXPECT_EQ(profile.training.tensor_parallel_collectives, "gloo");
    EXPECT_EQ(latency_profile_to_json(profile)["training"]["tensor_parallel_collectives"], "gloo");
    EXPECT_EQ(profile.context["timed_layer"]["parameters"], parameter_count(*share));
  }
  EXPECT_EQ(latency_profile_to_json(profiles[0])["layer_ms"], latency_profile_to_json(profiles[1])["layer_ms"]);
  EXPECT_EQ(latency_profile_to_json(profiles[0])["model_ms"], latency_profile_to_json(profiles[1])["model_ms"]);

  // The collectives need the peers, and theirs must be the ones asked for.
  ProfileRequest alone = tiny_request("qwen2-test");
  alone.training.tensor_parallel = tp;
  alone.training.tensor_parallel_collectives = "gloo";
  EXPECT_THROW(measure_latency_profile(alone), std::invalid_argument);
  alone.training.tensor_parallel_collectives = "nccl";
  test::run_tp_ranks(tp, [&](std::shared_ptr<TensorParallelGroup> group) {
    ProfileRequest request = alone;
    request.tensor_parallel_peers = tensor_parallel_profile_peers(group, config.vocab_size, c10::kCPU);
    EXPECT_THROW(measure_latency_profile(request), std::invalid_argument);
  });
}

// With its CP ring the profile times each point's micro-batch dealt to the CP ranks as
// the trainer deals it, attention a ring over them (one ring call per layer forward; the
// rest and head points run none). Dense attention, qwen2-test's L = 2 layers, one
// repetition: per length the layer point's ring and the whole model's L, the packed
// layer's, and the all-reduce of the slowest samples: 2 (1 + L) + 1 + 1 calls on both
// ranks, which return the same samples.
// Lengths 16 and 40 with stripes of 16: rank 1 holds no token of the 16-token sequence.
TEST(ProfileLayerBench, ContextParallelRingTimesEachMicroBatchOnTheCpRanksTogether) {
  const int64_t cp = 2;
  const Qwen2Config& config = qwen2_preset("qwen2-test");
  const int64_t layers = config.num_hidden_layers;
  std::vector<LatencyProfile> profiles(cp);
  std::vector<int64_t> calls(cp);
  test::run_group_ranks(cp, [&](c10::intrusive_ptr<c10d::Backend> group, int64_t rank) {
    auto ring = std::make_shared<RingContext>(std::move(group), rank, cp, 0, std::chrono::seconds(30));
    ProfileRequest request = tiny_request("qwen2-test");
    request.attention = dense_attention_options();
    request.budgets.clear();
    request.seq_lens = {16, 40};
    request.training.context_parallel = cp;
    request.training.cp_layout = CpLayout{CpLayoutKind::kStriped, 16};
    request.context_parallel_ring = ring;
    profiles[rank] = measure_latency_profile(request);
    calls[rank] = ring->next_call();  // the calls made so far
  });
  EXPECT_EQ(calls[0], 2 * (1 + layers) + 1 + 1);
  EXPECT_EQ(calls[1], calls[0]);
  for (const LatencyProfile& profile : profiles) {
    EXPECT_EQ(profile.training.context_parallel, cp);
    EXPECT_EQ(latency_profile_to_json(profile)["training"]["context_parallel"],
              json::parse(R"({"size": 2, "layout": "striped", "stripe_tokens": 16, "inner": 0, "collectives": "gloo"})"));
  }
  EXPECT_EQ(latency_profile_to_json(profiles[0])["layer_ms"], latency_profile_to_json(profiles[1])["layer_ms"]);
  EXPECT_EQ(latency_profile_to_json(profiles[0])["model_ms"], latency_profile_to_json(profiles[1])["model_ms"]);
  // Read back; without the ring it is refused.
  EXPECT_EQ(latency_profile_from_json(latency_profile_to_json(profiles[0]), "<cp>").training.cp_layout.stripe_tokens, 16);
  ProfileRequest alone = tiny_request("qwen2-test");
  alone.training.context_parallel = cp;
  EXPECT_THROW(measure_latency_profile(alone), std::invalid_argument);
}

// TP and CP together (tp 2 x cp 2 ranks, rank = cp_rank x tp + tp_rank as in training):
// each CP rank's share of a micro-batch runs through its TP group. Every rank makes the
// TP collectives of the TP-only profile (the same hand count) and the ring calls of the
// CP-only one, and all four return the same samples.
TEST(ProfileLayerBench, TensorAndContextParallelRanksTimeTogether) {
  const int64_t tp = 2, cp = 2;
  const Qwen2Config& config = qwen2_preset("qwen2-test");
  const int64_t layers = config.num_hidden_layers;
  auto store = c10::make_intrusive<c10d::HashStore>();
  const std::chrono::milliseconds timeout(30000);
  std::vector<LatencyProfile> profiles(tp * cp);
  std::vector<size_t> collectives(tp * cp);
  std::vector<int64_t> calls(tp * cp);
  std::vector<std::string> errors(tp * cp);
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < tp * cp; ++r) {
    threads.emplace_back([&, r] {
      try {
        const int64_t cp_rank = r / tp, tp_rank = r % tp;
        auto group = std::make_shared<TensorParallelGroup>(
            create_group(store, "tp/" + std::to_string(cp_rank) + "/", static_cast<int>(tp_rank), static_cast<int>(tp),
                         CollectiveBackend::kGloo, timeout, "127.0.0.1"),
            tp, tp_rank, timeout, "tp rank " + std::to_string(tp_rank));
        auto ring = std::make_shared<RingContext>(
            create_group(store, "cp/" + std::to_string(tp_rank) + "/", static_cast<int>(cp_rank), static_cast<int>(cp),
                         CollectiveBackend::kGloo, timeout, "127.0.0.1"),
            cp_rank, cp, 0, timeout);
        ProfileRequest request = tiny_request("qwen2-test");
        request.attention = dense_attention_options();
        request.budgets.clear();
        request.seq_lens = {16, 40};
        request.training.tensor_parallel = tp;
        request.training.tensor_parallel_collectives = "gloo";
        request.training.context_parallel = cp;
        request.training.cp_layout = CpLayout{CpLayoutKind::kStriped, 16};
        request.tensor_parallel_peers = tensor_parallel_profile_peers(group, config.vocab_size, c10::kCPU);
        request.context_parallel_ring = ring;
        profiles[r] = measure_latency_profile(request);
        collectives[r] = group->take_intervals().size();
        calls[r] = ring->next_call();
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  const size_t per_length = 8 + 8 + 4 + (8 * layers + 6);
  for (int64_t r = 0; r < tp * cp; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(errors[r], "");
    EXPECT_EQ(collectives[r], 2 * per_length + 8 + 4 + 1);
    EXPECT_EQ(calls[r], 2 * (1 + layers) + 1 + 1);
    EXPECT_EQ(latency_profile_to_json(profiles[r])["layer_ms"], latency_profile_to_json(profiles[0])["layer_ms"]);
    EXPECT_EQ(profiles[r].training.context_parallel, cp);
  }
}

// The profile says what it timed, read from the timed layer itself: with LoRA, adapters
// on the target projections are the layer's only trainable parameters.
TEST(ProfileLayerBench, LoraRequestTimesALayerWithAdaptersOnTheTargets) {
  const Qwen2Config& config = qwen2_preset("qwen2-test");
  Qwen2DecoderLayer plain(config, 0);
  const int64_t base = parameter_count(*plain);

  const LatencyProfile full = measure_latency_profile(tiny_request("qwen2-test"));
  EXPECT_EQ(full.context["timed_layer"]["parameters"], base);
  EXPECT_EQ(full.context["timed_layer"]["trainable_parameters"], base);
  EXPECT_EQ(full.context["timed_layer"]["lora_targets"], json::array());
  EXPECT_EQ(full.context["timed_layer"]["activation_checkpointing"], false);
  EXPECT_FALSE(full.training.lora.has_value());

  ProfileRequest request = tiny_request("qwen2-test");
  request.training.lora = lora_on_q_and_v();
  const LatencyProfile lora = measure_latency_profile(request);
  // A: rank x in, B: out x rank; q_proj 32 -> 32 (4 heads of 8), v_proj 32 -> 16 (2 of 8).
  const int64_t adapters = 4 * (config.hidden_size + 32) + 4 * (config.hidden_size + 16);
  EXPECT_EQ(lora.context["timed_layer"]["parameters"], base + adapters);
  EXPECT_EQ(lora.context["timed_layer"]["trainable_parameters"], adapters);
  EXPECT_EQ(lora.context["timed_layer"]["lora_targets"], json({"q_proj", "v_proj"}));
  ASSERT_TRUE(lora.training.lora.has_value());
  EXPECT_EQ(lora.training.lora->rank, 4);
  for (const auto& row : lora.layer_ms) {
    for (const LatencyStat& s : row) EXPECT_GT(s.median, 0.0);
  }
  ASSERT_EQ(lora.model_ms.size(), 3u);  // the whole model ran with adapters too
  for (const LatencyStat& s : lora.model_ms) EXPECT_GT(s.median, 0.0);

  ProfileRequest bad = tiny_request("qwen2-test");
  bad.training.lora = Qwen2LoraOptions{4, 8.0, 0.0, {"qkv_proj"}};
  EXPECT_THROW(measure_latency_profile(bad), std::invalid_argument);
}

// A folder's profile records the folder, and re-measuring (profile --check) builds the
// model from it with the profile's training options (here checkpointing and LoRA).
TEST(ProfileLayerBench, FolderProfileRecordsItsFolderAndIsReMeasuredFromIt) {
  const fs::path dir = folder_of("qwen2-test", "profile_bench_folder");
  ProfileRequest request = tiny_request(dir.string());
  request.training.activation_checkpointing = true;
  request.training.lora = lora_on_q_and_v();
  const LatencyProfile profile = measure_latency_profile(request);
  EXPECT_EQ(profile.model["from"], dir.string());
  EXPECT_EQ(profile.model["preset"], "Qwen2-Folder");
  // Read from the layer's autograd graph: its output hangs on the checkpoint's node.
  EXPECT_EQ(profile.context["timed_layer"]["activation_checkpointing"], true);
  EXPECT_TRUE(profile.training.activation_checkpointing);

  const ProfileCheck check = check_latency_profile(profile, request.attention, 0, 1);
  EXPECT_EQ(check.points.size(), 4u);

  // Gone or changed, the folder cannot stand for the profile's model any more.
  LatencyProfile changed = profile;
  changed.model["hidden_size"] = 64;
  EXPECT_THROW(check_latency_profile(changed, request.attention, 0, 1), std::invalid_argument);
  fs::remove_all(dir.parent_path());
  EXPECT_THROW(check_latency_profile(profile, request.attention, 0, 1), std::invalid_argument);
}

}  // namespace
}  // namespace sb
