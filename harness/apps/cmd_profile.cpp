#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>

#include "common/errors.h"
#include "harness/apps/attention_flags.h"
#include "harness/apps/cli_checks.h"
#include "harness/apps/commands.h"
#include "harness/common/atomic_file.h"
#include "harness/common/system_info.h"
#include "harness/latency/latency_profiler.h"
#include "harness/latency/run_profiles/method_profiles.h"
#include "harness/latency/run_profiles/tensor_parallel_profile_peers.h"
#include "harness/patterns/attention_patterns.h"
#include "harness/parallel/process_group.h"
#include "harness/runner/local_launcher.h"
#include "harness/runner/profile_ranks.h"
#include "models/qwen2/qwen2_lora.h"
#include "models/qwen2/qwen2_precision.h"

namespace sb::cli {
namespace {

struct ProfileFlags {
  std::string model;
  AttentionCommandFlags attention{"moba", {}};
  std::string device = "cpu";
  std::string precision = "fp32";
  bool activation_checkpointing = false;
  int64_t tensor_parallel = 1;
  std::string collectives;  // "": gloo on the CPU, nccl on GPUs
  int64_t context_parallel = 1;
  std::string cp_layout = "striped";
  int64_t cp_stripe_tokens = 128;
  int64_t cp_inner = 0;
  double timeout_s = 300;
  uint64_t seed = 0;
  int64_t lora_rank = 0;  // 0: full fine-tuning
  double lora_alpha = 0;
  double lora_dropout = 0;
  std::string lora_targets;
  std::string seq_lens;
  std::string budgets;
  int64_t warmup = 2;
  int64_t repetitions = 5;
  int64_t threads = 0;
  std::string out;
  std::string check;
  bool json = false;
};

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& flag) {
  std::vector<int64_t> values;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 1) {
      throw ConfigError(flag, "", "\"" + item + "\" is not a positive integer", "give a comma-separated list, e.g. 256,512,1024");
    }
    values.push_back(v);
  }
  if (values.empty()) throw ConfigError(flag, "", "is empty", "give a comma-separated list");
  return values;
}

// The model named by --model: a preset, or a folder with config.json (made absolute, so
// that the profile's record of it and its command line work from anywhere).
std::pair<std::string, Qwen2Config> model_of(const std::string& model) {
  std::string named = model;
  if (profile_model_is_folder(model)) named = std::filesystem::absolute(model).lexically_normal().string();
  try {
    return {named, profile_model_config(named)};
  } catch (const std::invalid_argument& e) {
    throw ConfigError("--model", "", e.what(), "name a preset, or a Hugging Face Qwen2 folder holding config.json");
  }
}

// --precision, --activation-checkpointing and the --lora-* flags: how the run the profile
// is for trains.
LatencyProfileTraining training_of(const ProfileFlags& f) {
  LatencyProfileTraining training;
  try {
    training.precision = qwen2_precision_from_name(f.precision);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("--precision", "", e.what(), "use fp32 or bf16-mixed");
  }
  training.activation_checkpointing = f.activation_checkpointing;
  if (f.tensor_parallel < 1) throw ConfigError("--tensor-parallel", "", "must be >= 1", "use the run's parallelism.tp");
  if (f.context_parallel < 1) throw ConfigError("--context-parallel", "", "must be >= 1", "use the run's parallelism.cp");
  training.tensor_parallel = f.tensor_parallel;
  // One backend between the TP and the CP ranks, as the trainer has.
  if (f.tensor_parallel == 1 && f.context_parallel == 1 && !f.collectives.empty()) {
    throw ConfigError("--collectives", "", "applies to --tensor-parallel or --context-parallel above 1 only", "leave it out");
  }
  const std::string collectives = f.collectives.empty() ? (f.device == "cuda" ? "nccl" : "gloo") : f.collectives;
  if (collectives == "nccl" && f.device != "cuda") {
    throw ConfigError("--collectives", "", "nccl needs --device cuda", "use gloo on the CPU");
  }
  if (f.tensor_parallel > 1) training.tensor_parallel_collectives = collectives == "none" ? "" : collectives;
  if (f.context_parallel > 1 && collectives == "none") {
    throw ConfigError("--collectives", "", "none cannot be combined with --context-parallel: the CP ranks run together",
                      f.device == "cuda" ? "leave --collectives out (nccl), or gloo for ranks sharing a GPU"
                                         : "leave --collectives out (gloo)");
  }
  if (f.context_parallel > 1 && f.device == "cuda") {
    // The GPU ring's steps run the fused block-sparse kernels (docs/context_parallel.md, "On GPUs").
    if (f.precision != "bf16-mixed") {
      throw ConfigError("--precision", "", "is " + f.precision + " with --context-parallel on CUDA: the GPU ring's "
                        "fused block-sparse kernels run in bfloat16", "use --precision bf16-mixed");
    }
    if (f.cp_layout == "striped" && f.cp_stripe_tokens < kGpuRingMinStripeTokens) {
      throw ConfigError("--cp-stripe-tokens", "", std::to_string(f.cp_stripe_tokens) + " is below the GPU ring's " +
                        std::to_string(kGpuRingMinStripeTokens) + " (each stripe is a tile of its kernels)",
                        "use the run's parallelism.cp_stripe_tokens (64 or more on GPUs)");
    }
  }
  training.context_parallel = f.context_parallel;
  if (f.context_parallel > 1) training.context_parallel_collectives = collectives;
  try {
    training.cp_layout.kind = cp_layout_options().from_name(f.cp_layout);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("--cp-layout", "", e.what(), "use contiguous, zigzag or striped");
  }
  if (f.cp_stripe_tokens < 1) throw ConfigError("--cp-stripe-tokens", "", "must be >= 1", "use the run's parallelism.cp_stripe_tokens");
  training.cp_layout.stripe_tokens = f.cp_stripe_tokens;
  if (f.cp_inner < 0 || (f.cp_inner > 0 && f.context_parallel % f.cp_inner != 0)) {
    throw ConfigError("--cp-inner", "", "must be 0 (a flat ring) or divide --context-parallel", "use the run's parallelism.cp_inner");
  }
  training.cp_inner = f.cp_inner;
  const bool lora_flags = f.lora_alpha != 0 || f.lora_dropout != 0 || !f.lora_targets.empty();
  if (f.lora_rank == 0) {
    if (lora_flags) {
      throw ConfigError("--lora-rank", "", "is missing, but other --lora-* flags are given",
                        "profile LoRA training with --lora-rank R --lora-alpha A --lora-targets q_proj,v_proj");
    }
    return training;
  }
  Qwen2LoraOptions lora{f.lora_rank, f.lora_alpha, f.lora_dropout, {}};
  std::stringstream targets(f.lora_targets);
  for (std::string name; std::getline(targets, name, ',');) lora.target_modules.push_back(name);
  try {
    qwen2_validate_lora_options(lora);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("--lora-rank/--lora-alpha/--lora-targets", "", e.what(),
                      "e.g. --lora-rank 8 --lora-alpha 16 --lora-targets q_proj,k_proj,v_proj,o_proj");
  }
  training.lora = std::move(lora);
  return training;
}

// Progress lines to stderr, from the leader only (the TP or CP ranks time the same points).
ProgressFn progress_printer(bool leader) {
  if (!leader) return {};
  return [](const std::string& line) { std::cerr << "  " << line << "\n"; };
}

// Whether a profile with these training options is timed on several ranks together.
bool timed_on_ranks(const LatencyProfileTraining& training) {
  return !training.tensor_parallel_collectives.empty() || training.context_parallel > 1;
}

// The process that runs a TP or CP profile's command: without a launcher it starts the
// ranks (running `rank_arguments`) and returns their exit code; as one of them it fills
// the request's peers (vocab_size: the model's) and runs body(request, leader). Exit code.
using RankBody = std::function<void(const ProfileRequest&, bool)>;
int on_profile_ranks(ProfileRequest request, double timeout_s, const std::vector<std::string>& rank_arguments,
                     const RankBody& body) {
  const LatencyProfileTraining& training = request.training;
  if (!DistEnv::started_as_rank()) {
    return launch_profile_ranks(training.tensor_parallel * training.context_parallel, rank_arguments, std::cerr);
  }
  arm_parent_death_signal();
  ProfileRanksOptions options;
  options.tp = training.tensor_parallel;
  options.cp = training.context_parallel;
  options.cp_inner = training.cp_inner;
  options.cuda = request.device == "cuda";
  // One backend between the TP and the CP ranks (training_of gives both the same name).
  const std::string& collectives =
      training.tensor_parallel > 1 ? training.tensor_parallel_collectives : training.context_parallel_collectives;
  options.gpu_backend = collectives == "nccl" ? CollectiveBackend::kNccl : CollectiveBackend::kGloo;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  const c10::Device on = options.cuda ? c10::Device(c10::kCUDA) : c10::Device(c10::kCPU);
  return run_as_profile_rank(
      options,
      [&](std::shared_ptr<TensorParallelGroup> group, std::shared_ptr<RingContext> ring, bool leader) {
        if (group) request.tensor_parallel_peers = tensor_parallel_profile_peers(std::move(group), request.config.vocab_size, on);
        request.context_parallel_ring = std::move(ring);
        body(request, leader);
      },
      std::cerr);
}

// --timeout-s (when not the default) for the ranks' command lines.
void add_timeout(std::vector<std::string>& args, const ProfileFlags& f) {
  if (f.timeout_s != ProfileFlags{}.timeout_s) {
    args.push_back("--timeout-s");
    args.push_back(nlohmann::json(f.timeout_s).dump());
  }
}

// Re-measures `profile`'s held-out points (on this TP or CP rank, with its peers, when
// `ranks` has them) and, on the leader, writes and prints the result.
int check_and_print(const LatencyProfile& profile, const ProfileFlags& f, const ProfileRequest& ranks, bool leader) {
  // Time under the profile's own thread count unless --threads says otherwise: a check at
  // LibTorch's default (all cores) of a profile measured single-threaded reports the
  // thread difference as prediction error.
  const int64_t recorded = profile.measured_threads();
  if (f.threads == 0 && recorded > 0) at::set_num_threads(static_cast<int>(recorded));
  const int64_t threads = at::get_num_threads();
  if (leader) std::cerr << "re-measuring held-out points of " << f.check << " ("
            << profile.model.value("from", profile.model.value("preset", "?")) << ", " << profile.attention << ", "
            << profile.device << ", " << latency_profile_training_text(profile.training) << ", " << threads << " intra-op thread"
            << (threads == 1 ? "" : "s")
            << (f.threads == 0 && recorded > 0 ? ", as the profile was measured" : "") << ")\n";
  if (leader && f.threads > 0 && recorded > 0 && f.threads != recorded) {
    std::cerr << "warning: --threads " << f.threads << " differs from the " << recorded
              << " thread(s) the profile was measured with; the error below includes that difference\n";
  }
  ProfileCheck check;
  try {
    const AttentionOptions attention =
        attention_plugin(profile.attention).from_profile_fields(profile.attention_fields);
    check = check_latency_profile(profile, attention, f.warmup, f.repetitions, progress_printer(leader),
                                  ranks.tensor_parallel_peers, ranks.context_parallel_ring);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(f.check, "", e.what(), "re-profile on this machine");
  }
  const auto points_json = [](const std::vector<ProfileCheckPoint>& list) {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& p : list) {
      nlohmann::json point{{"seq_len", p.seq_len}, {"budget", p.budget}, {"predicted_ms", p.predicted_ms},
                           {"measured_ms", p.measured.median}, {"measured_spread_ms", p.measured.spread},
                           {"measured_samples_ms", p.measured.samples}, {"abs_pct_error", p.abs_pct_error}};
      if (!p.packed_lengths.empty()) point["packed_lengths"] = p.packed_lengths;
      points.push_back(std::move(point));
    }
    return points;
  };
  const nlohmann::json result{{"profile", f.check},
                              {"mape_pct", check.mape},
                              {"points", points_json(check.points)},
                              {"packed_mape_pct", check.packed_mape},
                              {"packed_points", points_json(check.packed_points)},
                              {"threads", threads},
                              {"profile_threads", recorded > 0 ? nlohmann::json(recorded) : nlohmann::json()},
                              {"context", collect_system_info()}};
  if (!leader) return 0;
  if (!f.out.empty()) write_file_atomic(f.out, result.dump(1) + "\n");
  if (f.json) {
    std::cout << result.dump() << "\n";
  } else {
    std::printf("%8s %6s %12s %12s %8s  %s\n", "seq_len", "budget", "predicted_ms", "measured_ms", "error%",
                "packed as");
    for (const auto* list : {&check.points, &check.packed_points}) {
      for (const auto& p : *list) {
        std::printf("%8lld %6lld %12.3f %12.3f %8.2f  %s\n", static_cast<long long>(p.seq_len),
                    static_cast<long long>(p.budget), p.predicted_ms, p.measured.median, p.abs_pct_error,
                    packed_lengths_text(p).c_str());
      }
    }
    std::printf("MAPE on %zu held-out points: %.2f%%; on %zu packed micro-batches: %.2f%%\n", check.points.size(),
                check.mape, check.packed_points.size(), check.packed_mape);
  }
  return 0;
}


int run_check(const ProfileFlags& f) {
  const LatencyProfile profile = load_latency_profile(f.check);
  if (timed_on_ranks(profile.training)) {
    // Timed on its TP or CP ranks together: re-measured so.
    std::vector<std::string> args{"profile", "--check", f.check, "--warmup", std::to_string(f.warmup),
                                  "--repetitions", std::to_string(f.repetitions)};
    if (f.threads > 0) args.insert(args.end(), {"--threads", std::to_string(f.threads)});
    if (!f.out.empty()) args.insert(args.end(), {"--out", f.out});
    if (f.json) args.push_back("--json");
    add_timeout(args, f);
    int code = 0;
    ProfileRequest ranks;
    ranks.device = profile.device;
    ranks.training = profile.training;
    ranks.config.vocab_size = profile.model.value("vocab_size", int64_t{0});
    const int launched = on_profile_ranks(ranks, f.timeout_s, args, [&](const ProfileRequest& peers, bool leader) {
      code = check_and_print(profile, f, peers, leader);
    });
    return launched != 0 ? launched : code;
  }
  return check_and_print(profile, f, ProfileRequest{}, true);
}
}  // namespace

Command register_profile(CLI::App& app) {
  auto f = std::make_shared<ProfileFlags>();
  CLI::App* sub = app.add_subcommand("profile", "Measure (or check) a latency profile for the latency predictor");
  sub->footer(
      "Measures one decoder layer's forward + backward time over the grid --seq-lens x --budgets "
      "(median and interquartile range of --repetitions runs after --warmup, raw samples kept), the "
      "layer's non-attention work, the head, the whole model per length and one layer over 4 packed "
      "sequences of the shortest length, with the machine's context and this command, and writes --out. "
      "The layer trains as the run the profile is for trains: --precision, --activation-checkpointing, "
      "and LoRA (--lora-rank, --lora-alpha, --lora-targets: adapters trained, the base frozen); "
      "--tensor-parallel N times one TP rank's share of it (heads, MLP columns and vocabulary / N) on N "
      "TP ranks together, with the collectives between them (--collectives: gloo on the CPU, nccl or gloo "
      "on GPUs; none times one rank's share alone, without them): this command starts the N ranks on "
      "this machine, or is one of them under torchrun or srun; each repetition keeps the slowest rank's "
      "time and rank 0 writes the profile. "
      "--check FILE re-measures the points halfway between grid points, and micro-batches packed from "
      "three sequences, and prints the predictor's error (MAPE) on each. Example:\n"
      "  sparsebalance profile --model qwen2-tiny --attention moba --block 64 "
      "--seq-lens 64,128,256,512 --budgets 1,2,4,8 --out profile.json");
  sub->add_option("--model", f->model,
                  "Model preset, or a Hugging Face Qwen2 folder with config.json (one decoder layer is timed)");
  std::string names;
  for (const std::string& n : attention_pattern_names()) names += (names.empty() ? "" : " | ") + n;
  add_attention_flags(sub, f->attention, AttentionFlagSet::kProfile, names);
  sub->add_option("--device", f->device, "cpu | cuda")->capture_default_str();
  sub->add_option("--precision", f->precision, "fp32 | bf16-mixed")->capture_default_str();
  sub->add_flag("--activation-checkpointing", f->activation_checkpointing,
                "Run each layer with activation checkpointing (its forward again in the backward)");
  sub->add_option("--tensor-parallel", f->tensor_parallel,
                  "The run's parallelism.tp: time the tensor-parallel ranks' shares of the layer together")
      ->capture_default_str();
  sub->add_option("--collectives", f->collectives,
                  "With --tensor-parallel or --context-parallel: gloo | nccl | none (TP only) (default: gloo on "
                  "the CPU, nccl on GPUs; gloo on GPUs for ranks sharing one GPU)")
      ->check(CLI::IsMember({"gloo", "nccl", "none"}));
  sub->add_option("--context-parallel", f->context_parallel,
                  "The run's parallelism.cp: time each micro-batch on this many CP ranks together (GPUs: "
                  "bf16-mixed)")
      ->capture_default_str();
  sub->add_option("--cp-layout", f->cp_layout, "With --context-parallel: contiguous | zigzag | striped")
      ->capture_default_str();
  sub->add_option("--cp-stripe-tokens", f->cp_stripe_tokens, "With --context-parallel and striped: tokens per stripe")
      ->capture_default_str();
  sub->add_option("--cp-inner", f->cp_inner, "With --context-parallel: ranks per inner ring (0: flat)")
      ->capture_default_str();
  sub->add_option("--timeout-s", f->timeout_s, "With --tensor-parallel or --context-parallel: bound on the ranks' rendezvous and each collective")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_option("--seed", f->seed, "Seed of the timed inputs and weights")->capture_default_str();
  sub->add_option("--lora-rank", f->lora_rank, "LoRA rank: time LoRA training (base frozen, adapters trained)");
  sub->add_option("--lora-alpha", f->lora_alpha, "LoRA alpha (with --lora-rank)");
  sub->add_option("--lora-dropout", f->lora_dropout, "LoRA dropout (with --lora-rank)")->capture_default_str();
  sub->add_option("--lora-targets", f->lora_targets,
                  "Comma-separated LoRA target projections (with --lora-rank), e.g. q_proj,k_proj,v_proj,o_proj");
  sub->add_option("--seq-lens", f->seq_lens, "Comma-separated sequence lengths (ascending, at least 2)");
  sub->add_option("--budgets", f->budgets, "Comma-separated MoBA budgets (ascending)");
  sub->add_option("--warmup", f->warmup, "Untimed runs before timing")->capture_default_str();
  sub->add_option("--repetitions", f->repetitions, "Timed runs per point")->capture_default_str();
  sub->add_option("--threads", f->threads,
                  "Intra-op CPU threads (0: LibTorch's default; with --check, the profile's own)")
      ->capture_default_str();
  sub->add_option("--out", f->out, "Where to write the profile (or, with --check, the check's JSON)");
  sub->add_option("--check", f->check, "Re-measure held-out points of this profile and report the MAPE");
  sub->add_flag("--json", f->json, "With --check: print the result as one JSON object");
  return [f]() {
    if (f->threads > 0) at::set_num_threads(static_cast<int>(f->threads));
    if (!f->check.empty()) return run_check(*f);
    for (const auto& [flag, value] : {std::pair<const char*, const std::string*>{"--model", &f->model},
                                      {"--seq-lens", &f->seq_lens}, {"--out", &f->out}}) {
      if (value->empty()) throw ConfigError(flag, "", "is required", "see sparsebalance profile --help");
    }
    ProfileRequest request;
    std::tie(request.model, request.config) = model_of(f->model);
    request.training = training_of(*f);
    if (request.training.context_parallel > 1 && f->device == "cuda" && request.config.head_dim != 64 &&
        request.config.head_dim != 128) {
      throw ConfigError("--model", "", "has head_dim " + std::to_string(request.config.head_dim) +
                        ": the GPU ring's fused block-sparse kernels take 64 or 128",
                        "profile a model with head_dim 64 or 128 on GPU CP ranks, or use --device cpu");
    }
    request.attention = attention_of(f->attention, AttentionFlagSet::kProfile);
    request.device = f->device;
    request.seq_lens = parse_int_list(f->seq_lens, "--seq-lens");
    if (request.attention.budget_axis() != BudgetAxis::kNone) {
      if (f->budgets.empty()) {
        std::string example;
        for (int64_t k : request.attention.pattern().profile_budgets(2048, 0)) {
          example += (example.empty() ? "" : ",") + std::to_string(k);
        }
        throw ConfigError("--budgets", "", "is required for " + request.attention.name(),
                          "e.g. --budgets " + example + " (the pattern's default grid for 2048-token samples)");
      }
      request.budgets = parse_int_list(f->budgets, "--budgets");
    }
    request.warmup = f->warmup;
    request.repetitions = f->repetitions;
    request.seed = f->seed;
    // On the TP or CP ranks together, each with its share of the cores unless --threads says.
    const bool on_ranks = timed_on_ranks(request.training);
    const int64_t ranks = request.training.tensor_parallel * request.training.context_parallel;
    const int64_t threads = f->threads > 0 || !on_ranks || request.device == "cuda" ? f->threads : rank_thread_count(0, ranks);
    const auto measure = [&](const ProfileRequest& on_this_rank, bool leader) {
      if (threads > 0) at::set_num_threads(static_cast<int>(threads));
      LatencyProfile profile;
      try {
        profile = measure_latency_profile(on_this_rank, progress_printer(leader));
      } catch (const std::invalid_argument& e) {
        throw ConfigError("sparsebalance profile", "", e.what(),
                          "see sparsebalance profile --help for the flags");
      }
      if (!leader) return;
      // The command that measures this grid again, e.g. on another machine.
      profile.context["command"] = profile_command_line(request, f->out, threads);
      save_latency_profile(profile, f->out);
      std::cerr << "wrote " << f->out << "\n";
    };
    if (!on_ranks) {
      measure(request, true);
      return 0;
    }
    std::vector<std::string> args = profile_command_arguments(request, f->out, threads);
    add_timeout(args, *f);
    return on_profile_ranks(request, f->timeout_s, args, measure);
  };
}

}  // namespace sb::cli
