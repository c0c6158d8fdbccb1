#pragma once
// Checkpoints of a training run, for resuming it exactly. Layout:
//
//   <run>/checkpoints/latest                 name of the newest complete checkpoint
//   <run>/checkpoints/iter_00000040/         after 40 completed iterations
//     config.json, generation_config.json,   the model's HF config with its token ids,
//     tokenizer files                        generation settings and tokenizer
//                                            (saved_model_files.h)
//     model.safetensors.index.json           HF index of the shards below
//     model-00001-of-00002.safetensors       stage 0's parameters, HF names, as trained
//                                            (LoRA adapters merged into their weights)
//     model-00002-of-00002.safetensors       stage 1's (a tied head is stored once)
//     adapter/                               LoRA runs: the PEFT adapter folder
//                                            (adapter_config.json,
//                                            adapter_model.safetensors)
//     optimizer-00001-of-00002.safetensors   AdamW state of stage 0's parameters:
//                                            "<HF name>.exp_avg", ".exp_avg_sq", ".step"
//     rng-rank-00000.safetensors             each rank's random generator state(s)
//     trainer_state.json                     iterations done, data cursor, LR schedule
//                                            position, layout, the batch planner's state
//                                            (SAB's budget estimator)
//     checksums.sha256                       SHA-256 of every other file (sha256sum -c
//                                            checks it), written last; verified before
//                                            a resume (verify_checkpoint_files)
//
// So a checkpoint folder is also an HF model folder (`sparsebalance eval` and
// transformers load it), and a LoRA run's adapter/ loads in PEFT on top of its base.
// Resuming a LoRA run reads the adapters from adapter/ and rebuilds the frozen base as
// the run started it (seed or model.from). Writing is collective and atomic: every file goes into
// iter_N.partial/ (each file itself temp + fsync + rename), then rank 0 renames the
// folder into place and only then rewrites `latest`; a crash at any point leaves the
// previous checkpoint as the newest complete one. Stage shards are written by DP rank 0
// (the replicas are identical).
//
// What is not saved because it is a pure function of the iteration: the data (sample
// ids iteration * global_batch_size ...) and the learning rate (learning_rate_at).
// The batch planner's state (SAB's budget estimator) is saved: it is the same on every
// rank, so rank 0 writes it.

#include <nlohmann/json.hpp>

#include <torch/optim/adamw.h>

#include <cstdint>
#include <filesystem>
#include <optional>

#include "harness/config/manifest.h"
#include "harness/parallel/pipeline/pipeline_stage.h"
#include "harness/parallel/rank_context.h"
#include "harness/train/saved_model_files.h"

namespace sb {

struct CheckpointState {
  int64_t iterations_done = 0;  // the next iteration to run
  std::filesystem::path dir;
  nlohmann::json planner_state;  // null when the checkpoint has none
};

std::filesystem::path checkpoints_root(const std::filesystem::path& run_dir);

// The newest complete checkpoint of the run, if any: the one `latest` names, or, when
// that folder was deleted, the newest complete one left.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& run_dir);

// The iterations a checkpoint holds, from its trainer_state.json (what a rerun decides
// with); ConfigError naming that file and how to recover when it cannot be read.
int64_t checkpoint_iterations(const std::filesystem::path& dir);

// Collective in effect: each rank checks its share of the files against
// checksums.sha256 (each file by the rank that wrote it, the rest by rank 0), so a large
// checkpoint is hashed side by side and no rank waits on another's hashing. Checkpoints
// written before the checksums existed are not checked. ConfigError naming the damaged
// file and how to recover. load_checkpoint calls it first.
void verify_checkpoint_files(const std::filesystem::path& dir, const RankContext& context);

// Collective over all ranks of the run. Deletes all but the newest keep_last.
// planner_state: BatchPlanner::state() (null when the run has no planner).
// saved_files: what rank 0 writes beside the weights, read once when the run started
// (train_run), so every checkpoint of a run carries the same files; absent: read now.
void save_checkpoint(const std::filesystem::path& run_dir, int64_t iterations_done, const RunSpec& run,
                     const RankContext& context, PipelineStage& stage, torch::optim::AdamW& optimizer,
                     const nlohmann::json& planner_state = nullptr,
                     const std::optional<SavedModelFiles>& saved_files = std::nullopt);

// Loads this rank's stage parameters, optimizer state and random generator state from
// `dir`. Throws std::runtime_error naming the folder when it does not match the run
// (layout, model) or a file or tensor is missing.
CheckpointState load_checkpoint(const std::filesystem::path& dir, const RunSpec& run,
                                const RankContext& context, PipelineStage& stage,
                                torch::optim::AdamW& optimizer);

}  // namespace sb
