// `sparsebalance profile` through the real CLI: the command line `run` prints for a
// missing profile measures what the run trains (model folder, precision, activation
// checkpointing, LoRA), and wrong --model or --lora-* flags are exit 2 saying why.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/latency/latency_profile.h"
#include "harness/latency/latency_profiler.h"
#include "harness/common/system_info.h"
#include "harness/latency/run_profiles/method_profiles.h"
#include "models/qwen2/qwen2_config.h"
#include "models/qwen2/qwen2_hf_config.h"
#include "tests/support/run_command.h"
#include "kernels/attention/patterns/moba/moba_pattern.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using test::run_command;
using test::sparsebalance_binary;

// `line` ("sparsebalance profile ...") run by the built binary.
test::CommandResult run_printed(const std::string& line) {
  const std::string program = "sparsebalance ";
  EXPECT_EQ(line.rfind(program, 0), 0u) << line;
  return run_command(sparsebalance_binary() + " " + line.substr(program.size()));
}

TEST(ProfileCli, PrintedCommandLineReproducesTheRequest) {
  const fs::path dir = test::fresh_temp_dir("profile_cli_reproduce");
  const fs::path folder = dir / "my qwen";  // a space: the command line must quote it
  fs::create_directories(folder);
  std::ofstream(folder / "config.json") << qwen2_config_to_hf_json(qwen2_preset("qwen2-test")).dump(2);

  ProfileRequest request;
  request.model = folder.string();
  request.config = profile_model_config(request.model);
  MobaOptions token;  // not the default gate: the command line must name it
  token.block_size = 8;
  token.top_k = 2;
  token.gate = MobaGate::kToken;
  request.attention = moba_attention_options(token);
  request.training.activation_checkpointing = true;
  request.training.lora = Qwen2LoraOptions{4, 8.0, 0.05, {"q_proj", "v_proj", "down_proj"}};
  request.seq_lens = {16, 32};
  request.budgets = {1, 2};
  request.warmup = 0;
  request.repetitions = 1;
  const fs::path out = dir / "p.json";
  const std::string line = profile_command_line(request, out, 1);
  const auto r = run_printed(line);
  ASSERT_EQ(r.exit_code, 0) << line << "\n" << r.output;

  const LatencyProfile profile = load_latency_profile(out);
  EXPECT_EQ(profile.model["from"], folder.string());
  EXPECT_EQ(profile.model["preset"], "my qwen");
  EXPECT_EQ(profile.training.precision, Qwen2Precision::kFloat32);
  EXPECT_TRUE(profile.training.activation_checkpointing);
  ASSERT_TRUE(profile.training.lora.has_value());
  EXPECT_EQ(profile.training.lora->rank, 4);
  EXPECT_DOUBLE_EQ(profile.training.lora->alpha, 8.0);
  EXPECT_DOUBLE_EQ(profile.training.lora->dropout, 0.05);
  EXPECT_EQ(profile.training.lora->target_modules, (std::vector<std::string>{"q_proj", "v_proj", "down_proj"}));
  EXPECT_EQ(profile.context["timed_layer"]["lora_targets"], nlohmann::json({"q_proj", "v_proj", "down_proj"}));
  EXPECT_EQ(profile.seq_lens, request.seq_lens);
  EXPECT_EQ(profile.budgets, request.budgets);
  EXPECT_EQ(profile.block_size(), 8);
  EXPECT_EQ(profile.attention_fields.at("token_gate"), 1);
  EXPECT_NE(line.find("--gate token"), std::string::npos) << line;
  // The profile's own command is the one that made it.
  EXPECT_EQ(profile.context["command"], line);
  fs::remove_all(dir);
}

TEST(ProfileCli, ModelThatIsNeitherAPresetNorAFolderIsExitTwoListingThePresets) {
  const fs::path dir = test::fresh_temp_dir("profile_cli_bad_model");
  const std::string rest = " --seq-lens 16,32 --budgets 1 --out " + (dir / "p.json").string();
  auto r = run_command(sparsebalance_binary() + " profile --model qwen2-nope" + rest);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--model"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("qwen2-test"), std::string::npos) << r.output;
  r = run_command(sparsebalance_binary() + " profile --model " + dir.string() + rest);  // no config.json
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("folder with config.json"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "p.json"));
  fs::remove_all(dir);
}

// With no GPU visible (hidden here, so the test means the same on a GPU machine),
// --device cuda is exit 2 naming the flag and what to check, and writes nothing.
TEST(ProfileCli, CudaWithoutAVisibleGpuIsExitTwoSayingWhatToCheck) {
  const fs::path dir = test::fresh_temp_dir("profile_cli_no_gpu");
  const auto r = run_command("CUDA_VISIBLE_DEVICES= " + sparsebalance_binary() +
                             " profile --model qwen2-test --device cuda --precision bf16-mixed --seq-lens 16"
                             " --budgets 1 --out " + (dir / "p.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--device cuda: no CUDA device is visible here"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("CUDA_VISIBLE_DEVICES, or use --device cpu"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("sparsebalance profile --help"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "p.json"));
  fs::remove_all(dir);
}

TEST(ProfileCli, IncompleteOrUnknownLoraFlagsAreExitTwo) {
  const fs::path dir = test::fresh_temp_dir("profile_cli_bad_lora");
  const std::string base =
      sparsebalance_binary() + " profile --model qwen2-test --seq-lens 16,32 --budgets 1 --out " + (dir / "p.json").string();
  auto r = run_command(base + " --lora-targets q_proj");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--lora-rank"), std::string::npos) << r.output;
  r = run_command(base + " --lora-rank 4 --lora-alpha 8 --lora-targets q_proj,qkv");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown LoRA target module \"qkv\""), std::string::npos) << r.output;
  r = run_command(base + " --lora-rank 4 --lora-targets q_proj");  // no alpha
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("alpha"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "p.json"));
  fs::remove_all(dir);
}

// --tensor-parallel 2 starts the two TP ranks on this machine (rank 0 alone writes and
// prints); the profile is timed with their Gloo collectives and its printed command
// measures it again. --check re-measures it on two ranks too. Started as one process of
// three by a launcher (torchrun's variables), it is exit 2 naming the flag.
TEST(ProfileCli, TensorParallelProfileIsTimedOnTheTpRanksTogether) {
  const fs::path dir = test::fresh_temp_dir("profile_cli_tp");
  const fs::path out = dir / "tp.json";
  const std::string flags = " --model qwen2-test --attention moba --block 8 --tensor-parallel 2 --seq-lens 16,32 "
                            "--budgets 1,2 --warmup 0 --repetitions 2 --seed 5 --out " + out.string();
  auto r = run_command(sparsebalance_binary() + " profile" + flags);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("starting 2 ranks"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank 0] wrote " + out.string()), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[rank 1] wrote"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[rank 1]   L=16"), std::string::npos) << "progress from rank 0 only\n" << r.output;
  const LatencyProfile profile = load_latency_profile(out);
  EXPECT_EQ(profile.training.tensor_parallel, 2);
  EXPECT_EQ(profile.training.tensor_parallel_collectives, "gloo");
  EXPECT_EQ(profile.context["seed"], 5);
  EXPECT_EQ(profile.layer_ms[1][1].samples.size(), 2u);
  const std::string command = profile.context["command"];
  EXPECT_NE(command.find(" --tensor-parallel 2 "), std::string::npos) << command;
  EXPECT_NE(command.find(" --seed 5 "), std::string::npos) << command;
  EXPECT_NE(command.find(" --threads " + std::to_string(rank_thread_count(0, 2)) + " "), std::string::npos)
      << "each rank its share of the cores: " << command;

  r = run_command(sparsebalance_binary() + " profile --check " + out.string() + " --warmup 0 --repetitions 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("one of 2 TP ranks with its gloo collectives"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank 0] {\"context\""), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[rank 1] {"), std::string::npos) << r.output;

  // --collectives none: one rank's share alone, in this process.
  const fs::path alone = dir / "alone.json";
  r = run_command(sparsebalance_binary() + " profile --model qwen2-test --attention moba --block 8 --tensor-parallel 2 "
                  "--collectives none --seq-lens 16,32 --budgets 1 --warmup 0 --repetitions 1 --out " + alone.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("[rank"), std::string::npos) << r.output;
  EXPECT_EQ(load_latency_profile(alone).training.tensor_parallel_collectives, "");

  r = run_command("RANK=0 WORLD_SIZE=3 MASTER_PORT=1 " + sparsebalance_binary() + " profile" + flags);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--tensor-parallel: 2 ranks, but environment (RANK, WORLD_SIZE) started 3 processes"), std::string::npos)
      << r.output;
  fs::remove_all(dir);
}

// --context-parallel 2 times each micro-batch dealt to two CP ranks, attention a ring
// over them; the profile records the layout and the ring's collectives, and --check
// re-measures it on two ranks. On a GPU what the GPU ring cannot run is refused before
// any rank starts, exit 2.
TEST(ProfileCli, ContextParallelProfileIsTimedOnTheCpRanksTogether) {
  const fs::path dir = test::fresh_temp_dir("profile_cli_cp");
  const fs::path out = dir / "cp.json";
  auto r = run_command(sparsebalance_binary() + " profile --model qwen2-test --attention moba --block 8 "
                       "--context-parallel 2 --cp-layout striped --cp-stripe-tokens 8 --seq-lens 16,32 --budgets 1,2 "
                       "--warmup 0 --repetitions 1 --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("starting 2 ranks"), std::string::npos) << r.output;
  const LatencyProfile profile = load_latency_profile(out);
  EXPECT_EQ(profile.training.context_parallel, 2);
  EXPECT_EQ(profile.training.cp_layout.stripe_tokens, 8);
  EXPECT_EQ(profile.training.context_parallel_collectives, "gloo");
  const std::string command = profile.context["command"];
  EXPECT_NE(command.find(" --context-parallel 2 --cp-layout striped --cp-stripe-tokens 8 "), std::string::npos) << command;
  r = run_command(sparsebalance_binary() + " profile --check " + out.string() + " --warmup 0 --repetitions 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("one CP micro-batch on 2 striped CP ranks over gloo"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank 0] MAPE"), std::string::npos) << r.output;
  // Refused before any rank starts: float32, stripes below 64 tokens or a head_dim the
  // kernels do not take on a GPU, nccl on the CPU.
  const std::string grid = " --seq-lens 16,32 --budgets 1 --out " + (dir / "no.json").string();
  r = run_command(sparsebalance_binary() + " profile --model qwen2-test --context-parallel 2 --device cuda" + grid);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--precision: is fp32 with --context-parallel on CUDA"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("starting"), std::string::npos) << r.output;
  r = run_command(sparsebalance_binary() + " profile --model qwen2-test --context-parallel 2 --device cuda "
                  "--precision bf16-mixed --cp-stripe-tokens 16" + grid);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--cp-stripe-tokens: 16 is below the GPU ring's 64"), std::string::npos) << r.output;
  r = run_command(sparsebalance_binary() + " profile --model qwen2-test --context-parallel 2 --device cuda "
                  "--precision bf16-mixed" + grid);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--model: has head_dim 8"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("starting"), std::string::npos) << r.output;
  r = run_command(sparsebalance_binary() + " profile --model qwen2-test --context-parallel 2 --collectives nccl" + grid);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--collectives: nccl needs --device cuda"), std::string::npos) << r.output;
  r = run_command(sparsebalance_binary() + " profile --model qwen2-test --context-parallel 2 --collectives none" + grid);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--collectives: none cannot be combined with --context-parallel"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("starting"), std::string::npos) << r.output;
  // Beside TP: 2 x 2 ranks, each CP rank's share through its TP group.
  const fs::path both = dir / "tp_cp.json";
  r = run_command(sparsebalance_binary() + " profile --model qwen2-test --attention moba --block 8 --tensor-parallel 2 "
                  "--context-parallel 2 --cp-stripe-tokens 8 --seq-lens 16,40 --budgets 1,2 --warmup 0 --repetitions 1 "
                  "--out " + both.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("starting 4 ranks"), std::string::npos) << r.output;
  const LatencyProfile tp_cp = load_latency_profile(both);
  EXPECT_EQ(tp_cp.training.tensor_parallel, 2);
  EXPECT_EQ(tp_cp.training.tensor_parallel_collectives, "gloo");
  EXPECT_EQ(tp_cp.training.context_parallel, 2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sb
