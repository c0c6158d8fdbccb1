#include "harness/latency/run_profiles/method_profiles.h"

#include "harness/patterns/attention_patterns.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <sstream>

#include "common/errors.h"
#include "harness/common/json_differences.h"
#include "harness/common/system_info.h"
#include "harness/data/dataset.h"
#include "models/qwen2/qwen2_config.h"
#include "models/qwen2/qwen2_lora.h"
#include "models/qwen2/qwen2_precision.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

int64_t next_power_of_two(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

std::string join(const std::vector<int64_t>& values) {
  std::string text;
  for (int64_t v : values) text += (text.empty() ? "" : ",") + std::to_string(v);
  return text;
}

std::string join(const std::vector<std::string>& values) {
  std::string text;
  for (const std::string& v : values) text += (text.empty() ? "" : ",") + v;
  return text;
}

// `text` as one word of a POSIX shell command: as it is when it holds only characters
// no shell treats specially, else single-quoted (a folder path with spaces).
std::string shell_word(const std::string& text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string("_-./,:=+@%").find(c) != std::string::npos;
  });
  if (plain) return text;
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// The manifest's training options (and TP degree) as a profile's key; LoRA targets in
// the model's layer order, so that the same set always reads the same.
LatencyProfileTraining profile_training_of(const Manifest& manifest) {
  const TrainSection& train = manifest.train;
  LatencyProfileTraining training;
  training.tensor_parallel = manifest.parallelism.tp;
  // Timed with the TP and CP collectives the run uses: NCCL between GPUs unless the ranks
  // share them over Gloo, Gloo on the CPU.
  const std::string collectives = manifest.train.on_cuda() && !manifest.train.gpus_shared() ? "nccl" : "gloo";
  if (training.tensor_parallel > 1) training.tensor_parallel_collectives = collectives;
  // Timed on the run's CP ranks, dealt and ringed as the run does (with TP, on its tp x cp
  // ranks).
  if (manifest.parallelism.cp > 1) {
    training.context_parallel = manifest.parallelism.cp;
    training.cp_layout = manifest.parallelism.cp_layout;
    training.cp_inner = manifest.parallelism.cp_inner;
    training.context_parallel_collectives = collectives;
  }
  training.precision = train.precision;
  training.activation_checkpointing = train.activation_checkpointing;
  if (train.lora) {
    std::vector<std::string> targets;
    for (const std::string& name : qwen2_lora_module_names()) {
      const auto& listed = train.lora->target_modules;
      if (std::find(listed.begin(), listed.end(), name) != listed.end()) targets.push_back(name);
    }
    training.lora = train.lora->options();
    training.lora->target_modules = targets;
  }
  return training;
}

// Whether two LoRA settings (or full fine-tuning) time the same: the same rank on the
// same projections. Alpha only scales the adapter's output, and dropout is one cheap
// elementwise op on its input.
bool same_lora_timing(const std::optional<Qwen2LoraOptions>& a, const std::optional<Qwen2LoraOptions>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a) return true;
  const std::set<std::string> a_targets(a->target_modules.begin(), a->target_modules.end());
  const std::set<std::string> b_targets(b->target_modules.begin(), b->target_modules.end());
  return a->rank == b->rank && a_targets == b_targets;
}

// "$.methods[i].profile" of the run's method in the manifest it came from.
std::string profile_json_path(const RunSpec& run) {
  const json& methods = run.manifest.source.value("methods", json::array());
  for (size_t i = 0; i < methods.size(); ++i) {
    if (methods[i].is_object() && methods[i].value("name", "") == run.method) {
      return "$.methods[" + std::to_string(i) + "].profile";
    }
  }
  return "$.methods[0].profile";
}

// The threads one rank of this run computes with (the trainer's rule; the local launcher
// puts every rank on this host).
int rank_threads(const Manifest& manifest) {
  return static_cast<int>(
      rank_thread_count(manifest.train.threads, manifest.parallelism.dp * manifest.parallelism.pp *
                                                    manifest.parallelism.cp * manifest.parallelism.tp));
}

}  // namespace

ProfileRequest default_profile_request(const Manifest& manifest, const MethodSection& method,
                                       int64_t longest_sample) {
  ProfileRequest request;
  request.model = manifest.model.pretrained() ? manifest.model.from : manifest.model.preset;
  request.config = manifest.model.config;
  request.attention = method.attention;
  request.device = manifest.train.device_name();
  request.training = profile_training_of(manifest);
  request.seed = static_cast<uint64_t>(manifest.seed);
  const int64_t top = next_power_of_two(std::max<int64_t>(longest_sample, 64));
  for (int64_t len = std::max<int64_t>(16, top / 128); len <= top; len *= 2) request.seq_lens.push_back(len);
  while (request.seq_lens.size() > 8) request.seq_lens.erase(request.seq_lens.begin());
  request.budgets = method.attention.pattern().profile_budgets(
      longest_sample, method.budget == BudgetKind::kDst ? method.dst.k_max : 0);
  return request;
}

std::vector<std::pair<std::string, std::string>> attention_profile_flags(const AttentionOptions& attention) {
  const AttentionPatternPlugin& plugin = attention_plugin(attention);
  const json values = plugin.to_json(attention.pattern());
  const json defaults = plugin.to_json(plugin.make_default().pattern());
  std::vector<std::pair<std::string, std::string>> flags;
  for (const AttentionFlag& flag : plugin.profile_flags()) {
    if (!values.contains(flag.key)) continue;  // a key the resolved object leaves out at its default
    const json& value = values.at(flag.key);
    if (flag.always_written || !defaults.contains(flag.key) || value != defaults.at(flag.key)) {
      flags.emplace_back(flag.flag, value.is_string() ? value.get<std::string>() : value.dump());
    }
  }
  return flags;
}

std::vector<std::string> profile_command_arguments(const ProfileRequest& request, const fs::path& out,
                                                   int64_t threads) {
  std::vector<std::string> args{"profile", "--model", request.model, "--attention", request.attention.name()};
  const auto add = [&args](const std::string& flag, const std::string& value) {
    args.push_back(flag);
    args.push_back(value);
  };
  for (const auto& [flag, value] : attention_profile_flags(request.attention)) add(flag, value);
  add("--device", request.device);
  add("--precision", qwen2_precision_name(request.training.precision));
  if (request.training.activation_checkpointing) args.push_back("--activation-checkpointing");
  if (request.training.tensor_parallel > 1) {
    add("--tensor-parallel", std::to_string(request.training.tensor_parallel));
    const std::string& collectives = request.training.tensor_parallel_collectives;
    const std::string by_default = request.device == "cuda" ? "nccl" : "gloo";
    if (collectives != by_default) add("--collectives", collectives.empty() ? "none" : collectives);
  }
  if (request.training.context_parallel > 1) {
    const LatencyProfileTraining& t = request.training;
    add("--context-parallel", std::to_string(t.context_parallel));
    // One --collectives serves both kinds of rank: beside TP it is already there.
    const std::string by_default = request.device == "cuda" ? "nccl" : "gloo";
    if (t.tensor_parallel == 1 && t.context_parallel_collectives != by_default) {
      add("--collectives", t.context_parallel_collectives);
    }
    add("--cp-layout", t.cp_layout.name());
    if (t.cp_layout.kind == CpLayoutKind::kStriped) add("--cp-stripe-tokens", std::to_string(t.cp_layout.stripe_tokens));
    if (t.cp_inner > 0) add("--cp-inner", std::to_string(t.cp_inner));
  }
  if (const auto& lora = request.training.lora) {
    add("--lora-rank", std::to_string(lora->rank));
    add("--lora-alpha", json(lora->alpha).dump());
    add("--lora-targets", join(lora->target_modules));
    if (lora->dropout != 0) add("--lora-dropout", json(lora->dropout).dump());
  }
  add("--seq-lens", join(request.seq_lens));
  if (!request.budgets.empty()) add("--budgets", join(request.budgets));
  const ProfileRequest defaults;
  if (request.warmup != defaults.warmup) add("--warmup", std::to_string(request.warmup));
  if (request.repetitions != defaults.repetitions) add("--repetitions", std::to_string(request.repetitions));
  if (request.seed != defaults.seed) add("--seed", std::to_string(request.seed));
  if (threads > 0) add("--threads", std::to_string(threads));
  add("--out", out.string());
  return args;
}

std::string profile_command_line(const ProfileRequest& request, const fs::path& out, int64_t threads) {
  std::string line = "sparsebalance";
  for (const std::string& arg : profile_command_arguments(request, out, threads)) line += " " + shell_word(arg);
  return line;
}

void check_profile_matches(const LatencyProfile& profile, const Manifest& manifest, const MethodSection& method,
                           const std::string& json_path) {
  const std::string file = method.profile;
  const std::string fix = "delete " + file + " so that `sparsebalance run` measures it again, or name a profile of this setup";
  const auto refuse = [&](const std::string& what) { throw ConfigError(manifest.file, json_path, file + what, fix); };
  // The architecture, not the name: a profile measured for a preset serves a run that
  // starts from a folder of that architecture, and the other way round.
  const std::string name = profile.model.is_object() ? profile.model.value("preset", "") : "";
  const std::string differences =
      json_field_differences(latency_profile_architecture(profile.model),
                               latency_profile_architecture(latency_profile_model_json(manifest.model.config)));
  if (!differences.empty()) {
    refuse(" was measured for model \"" + name + "\", not the architecture of the run's \"" +
           manifest.model.label() + "\": " + differences + " (profile vs run)");
  }
  if (profile.attention != method.attention.name()) {
    refuse(" was measured with " + profile.attention + " attention, not " + method.attention.name());
  }
  // The pattern's parameters a layer's time depends on (AttentionPattern::profile_fields).
  const AttentionPattern& pattern = method.attention.pattern();
  for (const auto& [field, wanted] : pattern.profile_fields()) {
    const auto found = profile.attention_fields.find(field);
    const int64_t measured = found != profile.attention_fields.end() ? found->second : 0;
    if (measured != wanted) refuse(" was measured with " + pattern.profile_field_mismatch(field, measured, wanted));
  }
  const std::string device = manifest.train.device_name();
  if (profile.device != device) refuse(" was measured on " + profile.device + ", but the run trains on " + device);

  // How the run trains changes a layer's time as much as the model does (latency_profile.h).
  const LatencyProfileTraining run = profile_training_of(manifest);
  const LatencyProfileTraining& measured = profile.training;
  if (measured.precision != run.precision) {
    refuse(" was measured in precision " + qwen2_precision_name(measured.precision) + ", but the run trains in " +
           qwen2_precision_name(run.precision) + " ($.train.precision)");
  }
  if (measured.activation_checkpointing != run.activation_checkpointing) {
    refuse(std::string(" was measured ") + (measured.activation_checkpointing ? "with" : "without") +
           " activation checkpointing, but the run trains " + (run.activation_checkpointing ? "with" : "without") +
           " it ($.train.activation_checkpointing)");
  }
  if (!same_lora_timing(measured.lora, run.lora)) {
    refuse(" was measured for " + latency_profile_lora_text(measured.lora) + ", but the run trains " +
           latency_profile_lora_text(run.lora) + " ($.train.lora)");
  }
  if (measured.tensor_parallel != run.tensor_parallel) {
    refuse(" was measured for one of " + std::to_string(measured.tensor_parallel) +
           " tensor-parallel ranks, but the run has tp " + std::to_string(run.tensor_parallel) +
           " ($.parallelism.tp); a TP rank computes 1 / tp of each layer");
  }
  // Timed without collectives is allowed (tensor_parallel_collectives_warning); over other
  // ones is not: NCCL between GPUs and Gloo through host memory differ by orders of magnitude.
  if (!measured.tensor_parallel_collectives.empty() &&
      measured.tensor_parallel_collectives != run.tensor_parallel_collectives) {
    refuse(" was timed with " + measured.tensor_parallel_collectives + " TP collectives, but the run's are " +
           run.tensor_parallel_collectives + " ($.train.collectives)");
  }
  // A one-rank profile serves a CP run (context_parallel_warning); a CP one only its own layout.
  if (measured.context_parallel > 1) {
    const auto layout_text = [](const LatencyProfileTraining& t) {
      if (t.context_parallel == 1) return std::string("without context parallelism");
      return "on " + std::to_string(t.context_parallel) + " CP ranks, " + t.cp_layout.name() +
             (t.cp_layout.kind == CpLayoutKind::kStriped ? " by " + std::to_string(t.cp_layout.stripe_tokens) : "") +
             (t.cp_inner > 0 ? ", inner rings of " + std::to_string(t.cp_inner) : "");
    };
    // A flat ring (inner 0) is one inner ring of every rank.
    const auto inner = [](const LatencyProfileTraining& t) { return t.cp_inner == 0 ? t.context_parallel : t.cp_inner; };
    const bool same = measured.context_parallel == run.context_parallel && measured.cp_layout.kind == run.cp_layout.kind &&
                      inner(measured) == inner(run) &&
                      (measured.cp_layout.kind != CpLayoutKind::kStriped ||
                       measured.cp_layout.stripe_tokens == run.cp_layout.stripe_tokens);
    if (!same) {
      refuse(" was timed " + layout_text(measured) + ", but the run trains " + layout_text(run) + " ($.parallelism)");
    }
    if (measured.context_parallel_collectives != run.context_parallel_collectives) {
      refuse(" was timed with its CP ring over " + measured.context_parallel_collectives + ", but the run's ring runs over " +
             run.context_parallel_collectives + " ($.train.collectives)");
    }
  }
}

std::string context_parallel_warning(const LatencyProfile& profile, const Manifest& manifest, const std::string& file) {
  if (profile.kind != "measured" || manifest.parallelism.cp <= 1 || profile.training.context_parallel > 1) return "";
  return "warning: " + file + " times " +
         (profile.training.tensor_parallel > 1 ? std::string("one TP group") : std::string("one rank")) +
         " running each micro-batch whole, but the run deals it to " +
         std::to_string(manifest.parallelism.cp) +
         " CP ranks: its predictions carry neither the split nor the ring (a one-rank profile over-predicted "
         "2-rank CPU micro-batches by 48-69 %; a method's latency_calibration rescales them online). "
         "Delete the file to measure it on the CP ranks together on first use.";
}

std::string tensor_parallel_collectives_warning(const LatencyProfile& profile, const std::string& file) {
  if (profile.kind != "measured" || profile.training.tensor_parallel <= 1 ||
      !profile.training.tensor_parallel_collectives.empty()) {
    return "";
  }
  return "warning: " + file + " times one of " + std::to_string(profile.training.tensor_parallel) +
         " TP ranks' share of each layer without the TP collectives, so it under-predicts every micro-batch by "
         "their time (linear in its tokens). Delete the file to measure it on the TP ranks together on first use.";
}

std::string packed_point_warning(const LatencyProfile& profile, const Manifest& manifest, const std::string& file) {
  if (profile.kind != "measured" || profile.packed_ms || manifest.train.max_samples_per_microbatch == 1) return "";
  return "warning: " + file +
         " has no packed micro-batch point (measured before sparsebalance timed one), and this run packs "
         "several sequences per micro-batch: each sequence is charged the attention's shared cost, so packed "
         "micro-batches are over-predicted. Delete the file to measure it again on first use.";
}

std::string grid_coverage_warning(const LatencyProfile& profile, int64_t longest_sequence, const std::string& file) {
  if (profile.kind != "measured" || profile.seq_lens.empty() || profile.seq_lens.back() >= longest_sequence) return "";
  return "warning: " + file + " timed sequences up to " + std::to_string(profile.seq_lens.back()) +
         " tokens, but this run's micro-batches hold sequences of up to " + std::to_string(longest_sequence) +
         ": their predictions are extrapolated linearly from the last two lengths and under-predict attention's "
         "quadratic growth. Delete the file to measure it again on first use (its grid then reaches them).";
}

void ensure_method_profiles(const std::vector<RunSpec>& runs, bool may_measure, std::ostream& log, bool warn,
                            const ProfileRanksLauncher& launch_tp_ranks) {
  std::set<std::string> warned;
  for (const RunSpec& run : runs) {
    const Manifest& m = run.manifest;
    const MethodSection& method = m.methods.at(0);
    if (method.profile.empty()) continue;
    const std::string path = profile_json_path(run);
    // The data's longest sample, read once and only when needed (a JSONL file is tokenised).
    std::optional<int64_t> longest;
    const auto longest_sample = [&] {
      if (!longest) longest = make_dataset(m.data, m.seed, dataset_limits(m))->max_length();
      return *longest;
    };
    if (!fs::exists(method.profile)) {
      const ProfileRequest request = default_profile_request(m, method, longest_sample());
      const std::string command = profile_command_line(request, method.profile, rank_threads(m));
      if (!may_measure) {
        throw ConfigError(m.file, path, "names " + method.profile + ", which does not exist", "measure it first: " + command);
      }
      log << "measuring the latency profile " << method.profile << " (first use; " << request.seq_lens.size()
          << " lengths x " << std::max<size_t>(1, request.budgets.size()) << " budgets"
          << (request.training.tensor_parallel > 1 && request.training.context_parallel > 1
                  ? " on " + std::to_string(request.training.tensor_parallel) + " x " +
                        std::to_string(request.training.context_parallel) + " TP x CP ranks"
              : request.training.tensor_parallel > 1
                  ? " on " + std::to_string(request.training.tensor_parallel) + " TP ranks"
              : request.training.context_parallel > 1
                  ? " on " + std::to_string(request.training.context_parallel) + " CP ranks"
                  : std::string())
          << "): " << command << "\n";
      fs::create_directories(fs::absolute(method.profile).parent_path());
      LatencyProfile profile;
      const int64_t ranks = request.training.tensor_parallel * request.training.context_parallel;
      if (ranks > 1 || launch_tp_ranks) {
        // In processes of the sparsebalance binary that exit before any rank starts: the TP
        // or CP ranks timing their shares together, or one process, so that its memory (a
        // GPU's cached blocks above all) is free again when the run's rank 0 starts.
        if (!launch_tp_ranks) {
          throw ConfigError(m.file, path, "names " + method.profile + ", which does not exist",
                            "measure it on the run's ranks first: " + command);
        }
        const int code =
            launch_tp_ranks(ranks, profile_command_arguments(request, method.profile, rank_threads(m)), log);
        if (code != 0) {
          throw ConfigError(m.file, path, "could not measure a profile on its ranks (exit " + std::to_string(code) + ")",
                            "see the ranks' messages above, or measure one yourself: " + command);
        }
        profile = load_latency_profile(method.profile);
      } else {
        const int threads_before = at::get_num_threads();
        at::set_num_threads(rank_threads(m));
        try {
          profile = measure_latency_profile(request, [&log](const std::string& line) { log << "  " << line << "\n"; });
        } catch (const std::invalid_argument& e) {
          at::set_num_threads(threads_before);
          throw ConfigError(m.file, path, std::string("could not measure a profile: ") + e.what(),
                            "measure one yourself: " + command);
        }
        at::set_num_threads(threads_before);
      }
      profile.context["measured_for"] = {{"manifest", m.file}, {"method", run.method}, {"threads", rank_threads(m)}};
      profile.context["command"] = command;
      save_latency_profile(profile, method.profile);
      log << "wrote " << method.profile << "\n";
    }
    const LatencyProfile profile = load_latency_profile(method.profile);
    check_profile_matches(profile, m, method, path);
    if (warn && warned.insert(method.profile).second) {
      // Read for measured profiles only (an analytic one has no grid to cover).
      const int64_t longest_sequence =
          profile.kind != "measured" ? 0 : std::min(longest_sample(), m.train.max_tokens_per_microbatch);
      for (const std::string& warning :
           {packed_point_warning(profile, m, method.profile), tensor_parallel_collectives_warning(profile, method.profile),
            context_parallel_warning(profile, m, method.profile),
            grid_coverage_warning(profile, longest_sequence, method.profile)}) {
        if (!warning.empty()) log << warning << "\n";
      }
    }
  }
}

std::shared_ptr<const LatencyPredictor> load_method_predictor(const RunSpec& run) {
  const MethodSection& method = run.manifest.methods.at(0);
  if (method.profile.empty()) return nullptr;
  LatencyProfile profile = load_latency_profile(method.profile);
  check_profile_matches(profile, run.manifest, method, profile_json_path(run));
  try {
    return std::make_shared<const LatencyPredictor>(std::move(profile));
  } catch (const std::invalid_argument& e) {
    throw ConfigError(method.profile, "", e.what(), "measure the profile again with `sparsebalance profile`");
  }
}

}  // namespace sb
