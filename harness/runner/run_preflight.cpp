#include "harness/runner/run_preflight.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "common/errors.h"
#include "harness/common/system_info.h"
#include "harness/data/sample.h"
#include "harness/data/synthetic_dataset.h"
#include "harness/parallel/process_group.h"
#include "harness/eval/eval_spec.h"
#include "harness/common/peak_memory.h"
#include "harness/train/memory_estimate.h"

#ifdef SB_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace sb {
namespace fs = std::filesystem;
namespace {

enum class Kind { kFile, kFolder };

void require(const Manifest& m, const fs::path& path, Kind kind, const std::string& json_path,
             const std::string& fix) {
  const bool ok = kind == Kind::kFile ? fs::is_regular_file(path) : fs::is_directory(path);
  if (ok) return;
  const std::string what = kind == Kind::kFile ? "file" : "folder";
  const std::string problem = fs::exists(path) ? path.string() + " is not a " + what
                                               : "names " + path.string() + ", which does not exist";
  throw ConfigError(m.file, json_path, problem, fix);
}

// A missing profile is measured and written on first use: its folder must exist or be
// creatable, and be writable.
void require_profile_writable(const Manifest& m, const fs::path& profile, const std::string& json_path) {
  fs::path folder = profile.parent_path();
  while (!folder.empty() && !fs::exists(folder)) folder = folder.parent_path();
  if (folder.empty()) folder = ".";
  if (fs::is_directory(folder) && ::access(folder.c_str(), W_OK) == 0) return;
  throw ConfigError(m.file, json_path,
                    "names " + profile.string() + ", which does not exist and cannot be written (" +
                        folder.string() + " is not a writable folder)",
                    "point it at a profile file, or at a writable path where `sparsebalance run` measures one");
}

void check_eval_inputs(const Manifest& m) {
  if (!m.eval) return;
  const EvalSpec& e = *m.eval;
  if (!e.jieba_dir.empty()) require(m, e.jieba_dir, Kind::kFolder, "$.eval.jieba_dir", "install jieba or fix the path");
  if (e.longbench) {
    require(m, e.longbench->data_dir, Kind::kFolder, "$.eval.longbench.data",
            "download LongBench's data folder (docs/evaluation.md) or fix the path");
    require(m, e.longbench->config_dir, Kind::kFolder, "$.eval.longbench.config",
            "point it at LongBench's config folder (shared/data/longbench/config has one)");
  }
  if (e.longbench_v2) {
    require(m, e.longbench_v2->data_file, Kind::kFile, "$.eval.longbench_v2.data",
            "download LongBench v2's data.json (docs/evaluation.md) or fix the path");
    require(m, e.longbench_v2->config_dir, Kind::kFolder, "$.eval.longbench_v2.config",
            "point it at the folder holding v2_0shot.txt");
  }
  if (e.niah && e.niah->haystack != "synthetic") {
    require(m, e.niah->haystack, Kind::kFile, "$.eval.niah.haystack", "name a text file, or \"synthetic\"");
  }
  if (e.heldout) require(m, e.heldout->data, Kind::kFile, "$.eval.heldout.data", "fix the path");
}

// Every rank builds the whole global batch (token ids and a loss mask per sequence) to
// plan it: refused when that alone would take more than half of this machine's memory.
void check_global_batch_fits(const Manifest& m) {
  const int64_t longest = m.data.source == DataSource::kSynthetic
                              ? std::min(synthetic_longest_length(m.data.synthetic), m.train.max_tokens_per_microbatch)
                              : m.train.max_tokens_per_microbatch;
  const double bytes_per_sequence = static_cast<double>(sizeof(Sample)) +
                                    static_cast<double>(longest) * static_cast<double>(sizeof(int64_t) + sizeof(uint8_t));
  const double gib = static_cast<double>(m.train.global_batch_size) * bytes_per_sequence / (1024.0 * 1024.0 * 1024.0);
  // The ranks that share this machine: all of them under the local launcher, the
  // launcher's count under torchrun or srun.
  const int64_t ranks_here = DistEnv::started_as_rank() ? DistEnv::from_environment().local_world_size
                                                        : parallel_layout_of(m).world_size();
  const double machine_gib = host_memory_gib();
  if (machine_gib <= 0 || gib * static_cast<double>(ranks_here) <= machine_gib / 2) return;
  char text[200];
  std::snprintf(text, sizeof(text),
                "up to %.1f GiB on every rank, x %lld ranks here: more than half of this machine's %.1f GiB", gib,
                static_cast<long long>(ranks_here), machine_gib);
  throw ConfigError(m.file, "$.train.global_batch_size",
                    "is " + std::to_string(m.train.global_batch_size) + ": every rank holds the whole global batch (" +
                        "sequences up to " + std::to_string(longest) + " tokens) to plan it, " + text,
                    "lower train.global_batch_size (the sequences one optimizer step takes)");
}

void check_one_run(const RunSpec& run) {
  const Manifest& m = run.manifest;
  check_global_batch_fits(m);
  if (m.data.source == DataSource::kJsonl) {
    require(m, m.data.jsonl.path, Kind::kFile, "$.data.jsonl.path", "fix the path (relative to the manifest)");
    require(m, m.data.jsonl.tokenizer, Kind::kFile, "$.data.jsonl.tokenizer",
            "point it at the model's tokenizer.json (relative to the manifest)");
  }
  if (m.data.source == DataSource::kTokenized) {
    require(m, m.data.tokenized.path, Kind::kFolder, "$.data.tokenized.path",
            "build the cache first: python scripts/data/tokenize_sft.py --data DATA.jsonl --tokenizer-dir MODEL_DIR "
            "--out CACHE_DIR");
  }  // data.synthetic.length_file is read (and a missing one refused) when the manifest is parsed
  for (size_t i = 0; i < m.methods.size(); ++i) {
    const std::string& profile = m.methods[i].profile;
    if (profile.empty() || fs::exists(profile)) continue;
    require_profile_writable(m, profile, "$.methods[" + std::to_string(i) + "].profile");
  }
  check_eval_inputs(m);
}

int64_t visible_gpus() {
#ifdef SB_WITH_CUDA
  return static_cast<int64_t>(c10::cuda::device_count());
#else
  return 0;
#endif
}

}  // namespace

void check_run_inputs(const std::vector<RunSpec>& runs) {
  for (const RunSpec& run : runs) check_one_run(run);
}

int64_t default_max_local_ranks(const Manifest& manifest) {
  if (manifest.train.on_cuda() && !manifest.train.gpus_shared()) return visible_gpus();
  return kLocalRanksPerCore * cpu_core_count();  // CPU ranks, or CUDA ranks sharing GPUs
}

void check_local_world_fits(const Manifest& manifest, int64_t max_local_ranks) {
  const int64_t world = parallel_layout_of(manifest).world_size();
  const bool cuda = manifest.train.on_cuda() && !manifest.train.gpus_shared();
  const bool user_limit = max_local_ranks > 0;
  const int64_t limit = user_limit ? max_local_ranks : default_max_local_ranks(manifest);
  if (world <= limit) return;
  std::string source;
  if (user_limit) {
    source = "the --max-local-ranks " + std::to_string(limit);
  } else if (cuda) {
    source = "one rank per GPU, and this machine has " + std::to_string(limit) + " visible";
  } else {
    source = std::to_string(kLocalRanksPerCore) + " ranks per CPU core x " + std::to_string(cpu_core_count()) + " cores";
  }
  throw ConfigError(manifest.file, "$.parallelism",
                    "dp x pp x cp x tp = " + std::to_string(world) + " ranks do not fit on this machine (at most " +
                        std::to_string(limit) + ": " + source + ")",
                    std::string("lower parallelism.dp or .pp, run the ranks under torchrun or srun across machines, ") +
                        (cuda ? "let ranks share GPUs with train.collectives \"gloo\", " : "") +
                        "or raise the limit with --max-local-ranks N");
}

void print_memory_estimate(const std::vector<RunSpec>& runs, std::ostream& log, bool simulated) {
  if (runs.empty()) return;
  const double rss_mb = current_rss_mb();
  std::optional<MemoryEstimate> most;
  const RunSpec* holder = nullptr;
  for (const RunSpec& run : runs) {
    const bool cpu = !simulated && !run.manifest.train.on_cuda();
    MemoryEstimate e = estimate_rank_memory(run.manifest, cpu ? MemoryTarget::kHostProcess : MemoryTarget::kDevice,
                                            cpu && rss_mb > 0 ? rss_mb * 1024.0 * 1024.0 : 0.0);
    if (!most || e.largest().total() > most->largest().total()) {
      most = std::move(e);
      holder = &run;
    }
  }
  log << (runs.size() > 1 ? "[" + holder->name + "] " : std::string()) +
             describe_memory_estimate(*most, simulated ? "simulated " + (holder->manifest.cluster
                                                                              ? holder->manifest.cluster->preset
                                                                              : std::string("cluster"))
                                                     : holder->manifest.train.device_name());
}

void print_interleave_memory(const RunPlan& plan, std::ostream& log) {
  if (plan.interleave_block_iterations <= 0) return;
  double most_added = 0;
  size_t most_runs = 0;
  for (const std::vector<size_t>& comparison : plan.comparisons()) {
    std::vector<double> held;  // per pending run: what its trainer keeps between its blocks
    for (size_t i : comparison) {
      const PlannedRun& run = plan.runs[i];
      if (run.decision.disposition == Disposition::kSkip) continue;
      const StageMemoryEstimate stage = estimate_rank_memory(run.spec.manifest, MemoryTarget::kDevice).largest();
      held.push_back(stage.weights + stage.gradients + stage.optimizer);
    }
    if (held.size() < 2) continue;
    // The estimate above counts the largest run; the others' held state comes on top.
    double added = 0;
    for (double bytes : held) added += bytes;
    added -= *std::max_element(held.begin(), held.end());
    if (added >= most_added) {
      most_added = added;
      most_runs = held.size();
    }
  }
  if (most_runs == 0) return;
  char line[200];
  std::snprintf(line, sizeof(line),
                "interleaved in blocks of %lld iterations: up to %zu runs are held at once; their weights, gradients "
                "and optimizer state add %.2f GiB per rank to the estimate above\n",
                static_cast<long long>(plan.interleave_block_iterations), most_runs, most_added / (1024.0 * 1024.0 * 1024.0));
  log << line;
}

}  // namespace sb
