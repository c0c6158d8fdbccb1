#include "harness/latency/run_profiles/method_profiles.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "common/errors.h"
#include "harness/common/system_info.h"
#include "harness/data/dataset.h"
#include "models/qwen2/qwen2_config.h"

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
      rank_thread_count(manifest.train.threads, manifest.parallelism.dp * manifest.parallelism.pp));
}

}  // namespace

ProfileRequest default_profile_request(const Manifest& manifest, const MethodSection& method,
                                       int64_t longest_sample) {
  ProfileRequest request;
  request.preset = manifest.model.preset;
  request.attention = method.attention;
  request.device = manifest.train.device_name();
  request.precision = qwen2_precision_name(manifest.train.precision);
  request.seed = static_cast<uint64_t>(manifest.seed);
  const int64_t top = next_power_of_two(std::max<int64_t>(longest_sample, 64));
  for (int64_t len = std::max<int64_t>(16, top / 128); len <= top; len *= 2) request.seq_lens.push_back(len);
  while (request.seq_lens.size() > 8) request.seq_lens.erase(request.seq_lens.begin());
  if (method.attention.is_moba()) {
    const int64_t block = std::max<int64_t>(1, method.attention.block_size);
    const int64_t blocks = std::max<int64_t>(1, (std::max<int64_t>(longest_sample, 1) + block - 1) / block);
    std::vector<int64_t> budgets;
    for (int64_t k = 1; k <= blocks; k *= 2) budgets.push_back(k);
    budgets.push_back(blocks);
    budgets.push_back(method.attention.top_k);
    if (method.budget == BudgetKind::kDst) budgets.push_back(method.dst.k_max);
    std::sort(budgets.begin(), budgets.end());
    budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
    request.budgets = budgets;
  }
  return request;
}

std::string profile_command_line(const ProfileRequest& request, const fs::path& out, int64_t threads) {
  std::ostringstream line;
  line << "sparsebalance profile --model " << request.preset << " --attention " << request.attention.name();
  if (request.attention.is_moba()) line << " --block " << request.attention.block_size;
  line << " --device " << request.device << " --precision " << request.precision << " --seq-lens "
       << join(request.seq_lens);
  if (!request.budgets.empty()) line << " --budgets " << join(request.budgets);
  const ProfileRequest defaults;
  if (request.warmup != defaults.warmup) line << " --warmup " << request.warmup;
  if (request.repetitions != defaults.repetitions) line << " --repetitions " << request.repetitions;
  if (threads > 0) line << " --threads " << threads;
  line << " --out " << out.string();
  return line.str();
}

void check_profile_matches(const LatencyProfile& profile, const Manifest& manifest, const MethodSection& method,
                           const std::string& json_path) {
  const std::string file = method.profile;
  const std::string fix = "delete " + file + " so that `sparsebalance run` measures it again, or name a profile of this setup";
  const std::string preset = profile.model.is_object() ? profile.model.value("preset", "") : "";
  if (preset != manifest.model.preset) {
    throw ConfigError(manifest.file, json_path,
                      file + " was measured for model \"" + preset + "\", not \"" + manifest.model.preset + "\"", fix);
  }
  if (profile.attention != method.attention.name()) {
    throw ConfigError(manifest.file, json_path,
                      file + " was measured with " + profile.attention + " attention, not " + method.attention.name(), fix);
  }
  if (method.attention.is_moba() && profile.block_size != method.attention.block_size) {
    throw ConfigError(manifest.file, json_path,
                      file + " was measured with MoBA blocks of " + std::to_string(profile.block_size) +
                          " tokens, not " + std::to_string(method.attention.block_size),
                      fix);
  }
  const std::string device = manifest.train.device_name();
  if (profile.device != device) {
    throw ConfigError(manifest.file, json_path,
                      file + " was measured on " + profile.device + ", but the run trains on " + device, fix);
  }
}

std::string packed_point_warning(const LatencyProfile& profile, const Manifest& manifest, const std::string& file) {
  if (profile.kind != "measured" || profile.packed_ms || manifest.train.max_samples_per_microbatch == 1) return "";
  return "warning: " + file +
         " has no packed micro-batch point (measured before sparsebalance timed one), and this run packs "
         "several sequences per micro-batch: each sequence is charged the attention's shared cost, so packed "
         "micro-batches are over-predicted. Delete the file to measure it again on first use.";
}

void ensure_method_profiles(const std::vector<RunSpec>& runs, bool may_measure, std::ostream& log, bool warn) {
  std::set<std::string> warned;
  for (const RunSpec& run : runs) {
    const Manifest& m = run.manifest;
    const MethodSection& method = m.methods.at(0);
    if (method.profile.empty()) continue;
    const std::string path = profile_json_path(run);
    if (!fs::exists(method.profile)) {
      const Qwen2Config& config = m.model.config;
      const std::unique_ptr<Dataset> data =
          make_dataset(m.data, m.seed, config.vocab_size, m.train.max_tokens_per_microbatch);
      const ProfileRequest request = default_profile_request(m, method, data->max_length());
      if (!may_measure) {
        throw ConfigError(m.file, path, "names " + method.profile + ", which does not exist",
                          "measure it first: " + profile_command_line(request, method.profile, rank_threads(m)));
      }
      log << "measuring the latency profile " << method.profile << " (first use; " << request.seq_lens.size()
          << " lengths x " << std::max<size_t>(1, request.budgets.size()) << " budgets): "
          << profile_command_line(request, method.profile, rank_threads(m)) << "\n";
      const int threads_before = at::get_num_threads();
      at::set_num_threads(rank_threads(m));
      LatencyProfile profile;
      try {
        profile = measure_latency_profile(request, [&log](const std::string& line) { log << "  " << line << "\n"; });
      } catch (const std::invalid_argument& e) {
        at::set_num_threads(threads_before);
        throw ConfigError(m.file, path, std::string("could not measure a profile: ") + e.what(),
                          "measure one yourself: " + profile_command_line(request, method.profile, rank_threads(m)));
      }
      at::set_num_threads(threads_before);
      profile.context["measured_for"] = {{"manifest", m.file}, {"method", run.method}, {"threads", rank_threads(m)}};
      profile.context["command"] = profile_command_line(request, method.profile, rank_threads(m));
      fs::create_directories(fs::absolute(method.profile).parent_path());
      save_latency_profile(profile, method.profile);
      log << "wrote " << method.profile << "\n";
    }
    const LatencyProfile profile = load_latency_profile(method.profile);
    check_profile_matches(profile, m, method, path);
    const std::string warning = packed_point_warning(profile, m, method.profile);
    if (warn && !warning.empty() && warned.insert(method.profile).second) log << warning << "\n";
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
