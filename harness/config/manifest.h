#pragma once
// The experiment manifest as a typed tree. Parsing is strict (unknown keys and wrong
// types are ConfigErrors naming the JSON path); every default is filled in, so
// manifest_to_json() of a parsed manifest is the "resolved manifest" written next to
// the results, and parsing it again gives the same tree (round trip).

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace sb {

struct ModelSection {
  std::string preset;  // a name from models/qwen2/qwen2_config.h
};

// One component of the synthetic length distribution: lengths uniform in
// [min_tokens, max_tokens], drawn with probability weight / sum(weights).
struct LengthComponent {
  double weight = 1.0;
  int64_t min_tokens = 0;
  int64_t max_tokens = 0;
};

// Synthetic "arithmetic" task: sequence i is start_i, start_i + s_i, start_i + 2 s_i, ...
// (mod vocab_size) with s_i in [1, max_stride]. The first prompt_tokens tokens are the
// prompt (no loss); everything after is determined by them, so a model can learn it.
struct SyntheticDataSection {
  std::string task = "arithmetic";
  int64_t vocab_size = 0;  // 0 in the file means: the model's vocab_size (resolved)
  int64_t prompt_tokens = 4;
  int64_t max_stride = 3;
  std::vector<LengthComponent> length_mixture;
};

struct DataSection {
  std::string source = "synthetic";
  SyntheticDataSection synthetic;
};

// Ranks: dp * pp processes (one per GPU, or CPU processes with Gloo).
struct ParallelismSection {
  int64_t dp = 1;
  int64_t pp = 1;
  // Decoder layers per pipeline stage (size pp, summing to the model's layers); the
  // resolved manifest always lists it (the even split when the file does not).
  std::vector<int64_t> stage_layers;
  // A rank that crashes or hangs stops every rank within about this long.
  double timeout_s = 60;
  double bucket_mb = 25;  // size of the flat buffers of the DP gradient all-reduce
};

// Checkpoints of a run, for resuming it (results/<manifest>/<run>/checkpoints/).
struct CheckpointSection {
  int64_t every_iterations = 100;  // 0: no periodic checkpoints
  int64_t keep_last = 1;           // older checkpoints are deleted
  bool at_end = false;             // also save after the last iteration
  double write_timeout_s = 1800;   // how long ranks wait for each other while saving
};

struct TrainSection {
  std::string device = "cpu";
  int64_t iterations = 0;
  int64_t warmup_iterations = 2;  // excluded from the report's medians and rates
  int64_t global_batch_size = 8;  // samples per iteration (optimizer step)
  int64_t max_tokens_per_microbatch = 4096;
  double lr = 1e-3;
  double lr_warmup_fraction = 0.2;  // linear warm-up over this fraction of iterations
  double min_lr_ratio = 0.1;        // cosine decay to lr * min_lr_ratio at the last iteration
  double weight_decay = 0.0;
  double grad_clip = 1.0;  // max global L2 norm; 0 disables clipping
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.95;
  double adam_eps = 1e-8;
  int64_t threads = 0;  // intra-op CPU threads; 0 keeps LibTorch's default
};

// A named combination of the pluggable policies a run uses.
struct MethodSection {
  std::string name;
  std::string attention = "dense";
  std::string batching = "sequential";
};

struct Manifest {
  std::string name;  // results go to <results>/<name>/
  std::string description;
  int64_t seed = 1234;
  ModelSection model;
  DataSection data;
  ParallelismSection parallelism;
  CheckpointSection checkpoint;
  TrainSection train;
  std::vector<MethodSection> methods;
};

// One run of a manifest: the manifest narrowed to a single method. Its resolved JSON
// reproduces exactly this run.
struct RunSpec {
  std::string name;
  Manifest manifest;
};

// file: shown in errors (the manifest's path, or a label such as "<test>").
Manifest parse_manifest(const nlohmann::json& json, const std::string& file);
// Reads and parses a manifest file; JSON syntax errors name the line and column.
Manifest load_manifest(const std::filesystem::path& path);
nlohmann::json manifest_to_json(const Manifest& manifest);
std::vector<RunSpec> expand_runs(const Manifest& manifest);

// Values the manifest may choose from (also shown in error messages).
std::vector<std::string> manifest_attention_choices();
std::vector<std::string> manifest_batching_choices();

}  // namespace sb
