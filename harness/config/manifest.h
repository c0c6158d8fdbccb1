#pragma once
// The experiment manifest as a typed tree. Parsing is strict (unknown keys and wrong
// types are ConfigErrors naming the JSON path); every default is filled in, so
// manifest_to_json() of a parsed manifest is the "resolved manifest" written next to
// the results, and parsing it again gives the same tree (round trip).

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "harness/config/manifest_overrides.h"
#include "harness/config/method_spec.h"
#include "harness/config/simulation_spec.h"
#include "harness/config/sweep.h"
#include "kernels/attention/ring/cp_sharding.h"
#include "harness/data/data_spec.h"
#include "harness/data/dataset.h"
#include "harness/eval/eval_spec.h"
#include "harness/parallel/parallel_layout.h"
#include "common/option_names.h"
#include "models/qwen2/qwen2_config.h"
#include "models/qwen2/qwen2_lora.h"
#include "models/qwen2/qwen2_precision.h"

namespace sb {

// The model a run trains: a preset's architecture with weights drawn from the manifest
// seed, or a Hugging Face Qwen2/Qwen2.5 folder (`from`: config.json, safetensors,
// tokenizer files) whose weights it starts from. With both, the folder's architecture
// must be the preset's (a check that the path names the intended checkpoint).
struct ModelSection {
  std::string preset;  // a name from models/qwen2/qwen2_config.h; may be empty with `from`
  std::string from;    // HF folder, absolute once resolved; empty: random weights from the seed
  Qwen2Config config;  // the architecture (the folder's config.json, else the preset's)
  // RoPE scaling the manifest adds to that architecture, in config.json's form
  // ({"type": "yarn", "factor": 16, "original_max_position_embeddings": 32768}, as
  // Qwen2.5's card extends its 32K positions); null: the architecture's own.
  nlohmann::json rope_scaling;

  bool pretrained() const { return !from.empty(); }
  // What names the model in logs and checks: the preset, else the folder.
  std::string label() const { return preset.empty() ? from : preset; }
  // Where its weights come from, as PEFT's base_model_name_or_path: the folder, else the preset.
  std::string base_weights() const { return pretrained() ? from : preset; }
};

// Ranks: dp * pp * cp processes (one per GPU, or CPU processes with Gloo).
struct ParallelismSection {
  int64_t dp = 1;
  int64_t pp = 1;
  // Tensor parallelism with sequence parallelism (docs/tensor_parallel.md): each layer's
  // heads, MLP columns and vocabulary split over tp ranks; check_runnable_by_trainer says
  // what the model must divide.
  int64_t tp = 1;
  // Context parallelism (docs/context_parallel.md): each micro-batch's tokens are dealt
  // to cp ranks by cp_layout, and attention runs as a ring over them; cp_inner ranks per
  // inner ring (0: a flat ring). CPU only so far.
  int64_t cp = 1;
  CpLayout cp_layout;  // striped by 128 tokens unless the manifest says otherwise
  int64_t cp_inner = 0;
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

// LoRA fine-tuning (PEFT's LoRA: adapters on the named projections of every layer,
// everything else frozen). The paper's 3B runs: rank 32, alpha 64, dropout 0.05.
struct LoraSection {
  int64_t rank = 0;
  double alpha = 0.0;    // adapter output scaled by alpha / rank
  double dropout = 0.0;  // on the adapter input
  std::vector<std::string> target_modules;  // q_proj k_proj v_proj o_proj gate_proj up_proj down_proj

  Qwen2LoraOptions options() const { return {rank, alpha, dropout, target_modules}; }
};

// train.lr_schedule: after warm-up, cosine decay or a constant rate (harness/train/lr_schedule.h).
enum class LrSchedule { kCosine, kConstant };
const OptionNames<LrSchedule>& lr_schedule_options();  // "cosine" | "constant"

// train.device: CPU ranks (Gloo) or one GPU per rank (NCCL).
enum class TrainDevice { kCpu, kCuda };
const OptionNames<TrainDevice>& train_device_options();  // "cpu" | "cuda"

// train.collectives: what carries the data-parallel, pipeline and tensor-parallel
// traffic of CUDA ranks. auto: NCCL, one GPU per rank; gloo: Gloo with the tensors
// staged through host memory, so ranks may share a GPU (slower; for checking multi-rank
// runs on one GPU). CPU ranks always use Gloo.
enum class TrainCollectives { kAuto, kGloo };
const OptionNames<TrainCollectives>& train_collectives_options();  // "auto" | "gloo"

// train.nonfinite: what an iteration whose loss or gradient norm is NaN or infinite
// does. A non-finite gradient norm (what a NaN loss leads to) always skips the optimizer
// step on every rank (weights and moments unchanged). stop: the run then stops there
// (exit 2, naming the iteration, ranks and values); skip: the iteration is recorded (with
// "skipped_step": true when the step was skipped) and training goes on (Megatron's and
// torchtitan's behaviour under loss scaling).
enum class NonFinitePolicy { kStop, kSkip };
const OptionNames<NonFinitePolicy>& nonfinite_options();  // "stop" | "skip"

// Upper bounds that catch typing slips before anything starts (docs/manifest.md).
inline constexpr int64_t kMaxTrainThreads = 1024;
inline constexpr double kMaxLearningRate = 1.0;

struct TrainSection {
  TrainDevice device = TrainDevice::kCpu;
  TrainCollectives collectives = TrainCollectives::kAuto;
  int64_t iterations = 0;
  int64_t warmup_iterations = 2;  // excluded from the report's medians and rates
  int64_t global_batch_size = 8;  // samples per iteration (optimizer step)
  int64_t max_tokens_per_microbatch = 4096;
  int64_t max_samples_per_microbatch = 0;  // 0 = no limit; 1 = one sequence per micro-batch (the paper)
  double lr = 1e-3;
  double lr_warmup_fraction = 0.2;  // linear warm-up over this fraction of iterations
  double min_lr_ratio = 0.1;        // cosine decay to lr * min_lr_ratio at the last iteration
  double weight_decay = 0.0;
  double grad_clip = 1.0;  // max global L2 norm; 0 disables clipping
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.95;
  double adam_eps = 1e-8;
  int64_t threads = 0;  // intra-op CPU threads; 0 keeps LibTorch's default
  LrSchedule lr_schedule = LrSchedule::kCosine;
  NonFinitePolicy nonfinite = NonFinitePolicy::kStop;
  bool activation_checkpointing = false;  // per decoder layer
  Qwen2Precision precision = Qwen2Precision::kFloat32;  // "fp32" | "bf16-mixed"
  std::optional<LoraSection> lora;        // absent: full fine-tuning

  bool on_cuda() const { return device == TrainDevice::kCuda; }
  std::string device_name() const { return train_device_options().name_of(device); }
  // CUDA ranks on Gloo through host memory (they may share GPUs).
  bool gpus_shared() const { return on_cuda() && collectives == TrainCollectives::kGloo; }
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
  // The method whose runs speedups are measured against (default: the first method).
  std::string baseline;
  std::vector<SweepAxis> sweep;  // empty: one run per method
  // The most runs the manifest may expand to (sweep.h); not part of any run's resolved
  // manifest, so raising it changes no run.
  int64_t max_runs = kDefaultMaxRuns;
  // "interleave": {"block_iterations": N}: the runs of one sweep point train side by side
  // in blocks of N iterations, in alternating order (harness/runner/interleave_schedule.h);
  // 0 (absent): one run after the other. How the runs are measured, not what they
  // compute, so, like max_runs, it is part of no run's resolved manifest.
  int64_t interleave_block_iterations = 0;
  // What to evaluate after training (harness/eval/eval_spec.h); every run's final
  // weights are evaluated by rank 0 once training has finished.
  std::optional<EvalSpec> eval;
  // Read by `sparsebalance simulate` only (harness/config/simulation_spec.h); absent
  // stays absent in the resolved manifest.
  std::optional<ClusterSection> cluster;
  std::optional<SimulationSection> simulation;
  nlohmann::json source;         // the manifest as written (sweep points are built from it)
  std::string file;              // where it was read from (errors, relative paths)
};

// One run of a manifest: the manifest narrowed to a single method. Its resolved JSON
// reproduces exactly this run.
struct RunSpec {
  std::string name;
  Manifest manifest;
  // The sweep values this run uses, {"dotted.path": value} over the axes that apply to
  // its method; empty without a sweep.
  nlohmann::json sweep_point = nlohmann::json::object();
  // Whether its method is the manifest's baseline.
  bool is_baseline = false;
  // The method of this run and the manifest's baseline method (run.manifest is
  // narrowed to one method, which is its own baseline there).
  std::string method;
  std::string baseline_method;
};

// The ranks' layout: the manifest's dp x pp over its model's decoder layers, split as
// parallelism.stage_layers says.
ParallelLayout parallel_layout_of(const Manifest& manifest);

// file: shown in errors (the manifest's path, or a label such as "<test>").
Manifest parse_manifest(const nlohmann::json& json, const std::string& file);
// Reads a manifest file, applies the --set overrides (manifest_overrides.h) and parses
// it. JSON syntax errors name the line and column; an error at or below a path an
// override set says which --set gave the value.
Manifest load_manifest(const std::filesystem::path& path, const std::vector<ManifestOverride>& overrides = {});
nlohmann::json manifest_to_json(const Manifest& manifest);
// The resolved manifest's "model": {"preset"?, "from"?}.
nlohmann::json model_section_to_json(const ModelSection& model);
std::vector<RunSpec> expand_runs(const Manifest& manifest);
// How many runs expand_runs makes, without making them (a float: a grid may overflow).
long double count_runs(const Manifest& manifest);

// The limits the manifest's model and micro-batch capacity put on its data.
DatasetLimits dataset_limits(const Manifest& manifest);

// What the real trainer cannot run (a tp the model does not divide, cp with tp, ...): ConfigError naming the JSON path.
void check_runnable_by_trainer(const Manifest& manifest);


}  // namespace sb
