#include "harness/train/checkpoint.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/common/file_checksums.h"
#include "harness/parallel/tensor_parallel/tensor_parallel_sharding.h"
#include "harness/train/generator_states.h"
#include "harness/train/saved_model_files.h"
#include "models/qwen2/qwen2_hf_checkpoint.h"
#include "models/qwen2/qwen2_hf_config.h"
#include "models/qwen2/qwen2_lora.h"
#include "models/safetensors/safetensors_checkpoint.h"
#include "models/safetensors/safetensors_file.h"
#include "models/safetensors/safetensors_writer.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* const kAdapterFolder = "adapter";

std::string numbered(const char* stem, int64_t index, int64_t count) {
  char name[96];
  std::snprintf(name, sizeof(name), "%s-%05lld-of-%05lld.safetensors", stem,
                static_cast<long long>(index + 1), static_cast<long long>(count));
  return name;
}

std::string checkpoint_name(int64_t iterations_done) {
  char name[32];
  std::snprintf(name, sizeof(name), "iter_%08lld", static_cast<long long>(iterations_done));
  return name;
}

std::string rng_file(int64_t rank) {
  char name[48];
  std::snprintf(name, sizeof(name), "rng-rank-%05lld.safetensors", static_cast<long long>(rank));
  return name;
}

const char* const kChecksumsFile = "checksums.sha256";

// Each writing rank's checksums of the files it wrote, merged by rank 0.
std::string rank_checksums_file(int64_t rank) {
  char name[48];
  std::snprintf(name, sizeof(name), "checksums-rank-%05lld.sha256", static_cast<long long>(rank));
  return name;
}

void write_rank_checksums(const fs::path& partial, int64_t rank, const std::vector<std::string>& files) {
  ChecksumList list;
  for (const std::string& file : files) list[file] = sha256_of_file(partial / file);
  write_file_atomic(partial / rank_checksums_file(rank), checksum_list_text(list));
}

// checksums.sha256 over every file of the folder: the ranks' lists of what they wrote,
// then rank 0's own files (configs, tokenizer, index, adapter, trainer state) hashed here.
void write_folder_checksums(const fs::path& partial) {
  ChecksumList merged;
  std::vector<fs::path> rank_lists;
  for (const auto& entry : fs::directory_iterator(partial)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("checksums-rank-", 0) != 0) continue;
    for (const auto& [file, digest] : parse_checksum_list(read_file(entry.path()), entry.path().string())) {
      merged[file] = digest;
    }
    rank_lists.push_back(entry.path());
  }
  for (const fs::path& list : rank_lists) fs::remove(list);
  ChecksumList all;
  for (const auto& entry : fs::recursive_directory_iterator(partial)) {
    if (!entry.is_regular_file()) continue;
    const std::string file = entry.path().lexically_relative(partial).generic_string();
    if (file == kChecksumsFile) continue;
    const auto listed = merged.find(file);
    all[file] = listed != merged.end() ? listed->second : sha256_of_file(entry.path());
  }
  write_file_atomic(partial / kChecksumsFile, checksum_list_text(all));
}

void fsync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open folder " + dir.string() + " to sync it");
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw std::runtime_error("fsync of folder " + dir.string() + " failed");
}

json layout_json(const RankContext& context) {
  json layout = {{"dp", context.layout.dp()}, {"pp", context.layout.pp()},
                 {"stage_layers", context.layout.stage_layer_counts()}};
  if (context.layout.tp() > 1) layout["tp"] = context.layout.tp();  // older checkpoints: tp 1, no key
  return layout;
}

// What the weights a resume rebuilds depend on beyond the model section: the seed (the
// initial weights of a preset, LoRA's A) and the adapters' shape.
json weights_key_json(const RunSpec& run) {
  const auto& lora = run.manifest.train.lora;
  return {{"seed", run.manifest.seed},
          {"lora", lora ? json{{"rank", lora->rank}, {"alpha", lora->alpha}, {"target_modules", lora->target_modules}}
                        : json()}};
}

// The generator states a checkpoint's rng file holds ("cpu" always).
GeneratorStates generator_states_in(const SafetensorsFile& file) {
  GeneratorStates states{{"cpu", file.tensor("cpu")}};
  for (const std::string& name : file.names()) {
    if (name != "cpu") states.emplace_back(name, file.tensor(name));
  }
  return states;
}

// The stages' adapter shards of a LoRA run combined into one PEFT adapter folder,
// partial/adapter/ (adapter_config.json, adapter_model.safetensors); the shards go.
void write_peft_adapter(const fs::path& partial, const RunSpec& run) {
  const int64_t pp = run.manifest.parallelism.pp;
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (int64_t s = 0; s < pp; ++s) {
    const SafetensorsFile file = SafetensorsFile::open(partial / numbered("adapter", s, pp));
    for (const std::string& name : file.names()) tensors.emplace_back(name, file.tensor(name).to(at::kFloat));
  }
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const Qwen2LoraOptions options = run.manifest.train.lora->options();
  const fs::path dir = partial / kAdapterFolder;
  fs::create_directories(dir);
  write_safetensors(dir / "adapter_model.safetensors", tensors, {{"format", "pt"}});
  write_file_atomic(dir / "adapter_config.json",
                    qwen2_peft_adapter_config(options, run.manifest.model.base_weights()).dump(2) + "\n");
  fsync_directory(dir);
  for (int64_t s = 0; s < pp; ++s) fs::remove(partial / numbered("adapter", s, pp));
}

// Rank 0, after every rank wrote its files into `partial`: the HF index and config,
// trainer_state.json, then the rename and `latest`.
void finish_checkpoint(const fs::path& root, const fs::path& partial, int64_t iterations_done,
                       const RunSpec& run, const RankContext& context, const json& planner_state,
                       const std::optional<SavedModelFiles>& saved_files) {
  const int64_t pp = context.layout.pp();
  json weight_map = json::object();
  uint64_t total_size = 0;
  for (int64_t s = 0; s < pp; ++s) {
    const std::string shard = numbered("model", s, pp);
    const SafetensorsFile file = SafetensorsFile::open(partial / shard);
    for (const std::string& name : file.names()) {
      weight_map[name] = shard;
      total_size += file.info(name).end - file.info(name).begin;
    }
  }
  write_file_atomic(partial / "model.safetensors.index.json",
                    json{{"metadata", {{"total_size", total_size}}}, {"weight_map", weight_map}}.dump(2) + "\n");
  write_saved_model_files(saved_files ? *saved_files : saved_model_files(run.manifest), partial);
  if (run.manifest.train.lora) write_peft_adapter(partial, run);
  const TrainSection& train = run.manifest.train;
  write_file_atomic(partial / "trainer_state.json",
                    json{{"format", "sparsebalance-checkpoint-1"},
                         {"run", run.name},
                         {"model", model_section_to_json(run.manifest.model)},
                         {"iterations_done", iterations_done},
                         {"data_cursor", {{"next_sample", iterations_done * train.global_batch_size}}},
                         {"lr_schedule", {{"next_iteration", iterations_done}}},
                         {"layout", layout_json(context)},
                         {"weights", weights_key_json(run)},
                         {"planner", planner_state}}
                            .dump(2) + "\n");
  write_folder_checksums(partial);  // last: it covers every other file
  fsync_directory(partial);
  const fs::path final_dir = root / checkpoint_name(iterations_done);
  fs::remove_all(final_dir);  // a checkpoint of the same iteration from before a resume
  fs::rename(partial, final_dir);
  fsync_directory(root);
  write_file_atomic(root / "latest", checkpoint_name(iterations_done) + "\n");

  std::vector<fs::path> complete;
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind("iter_", 0) == 0 && name.find('.') == std::string::npos) {
      complete.push_back(entry.path());
    }
  }
  std::sort(complete.begin(), complete.end());
  const auto keep = static_cast<size_t>(run.manifest.checkpoint.keep_last);
  for (size_t i = 0; i + keep < complete.size(); ++i) fs::remove_all(complete[i]);
}

}  // namespace

fs::path checkpoints_root(const fs::path& run_dir) { return run_dir / "checkpoints"; }

std::optional<fs::path> latest_checkpoint(const fs::path& run_dir) {
  const fs::path pointer = checkpoints_root(run_dir) / "latest";
  if (!fs::exists(pointer)) return std::nullopt;
  std::string name = read_file(pointer);
  name.erase(name.find_last_not_of(" \n\r\t") + 1);
  const fs::path dir = checkpoints_root(run_dir) / name;
  if (!name.empty() && !fs::exists(dir)) {
    // Deleted by the user (a damaged checkpoint, verify_checkpoint's advice): the newest
    // complete one left, if any.
    std::vector<fs::path> complete;
    for (const auto& entry : fs::directory_iterator(checkpoints_root(run_dir))) {
      const std::string folder = entry.path().filename().string();
      if (entry.is_directory() && folder.rfind("iter_", 0) == 0 && folder.find('.') == std::string::npos) {
        complete.push_back(entry.path());
      }
    }
    if (complete.empty()) return std::nullopt;
    std::sort(complete.begin(), complete.end());
    return complete.back();
  }
  if (name.empty() || !fs::exists(dir / "trainer_state.json")) {
    throw std::runtime_error(pointer.string() + " names \"" + name +
                             "\", which is not a complete checkpoint (fix: delete the run folder or "
                             "rerun with --force to start afresh)");
  }
  return dir;
}

namespace {

std::string damaged_checkpoint_fix(const fs::path& dir) {
  return "delete " + dir.string() +
         " (the run then resumes from the newest checkpoint left, or starts afresh without one), or rerun with "
         "--force to start the run afresh";
}

// Whether `file` (relative to the checkpoint) is this rank's to verify: each file by the
// one rank that wrote it (a stage's shards by its DP 0 / CP 0 / TP 0 rank, the RNG
// states by their rank), everything else by rank 0. The ranks hash side by side.
bool verified_here(const std::string& file, const RankContext& context) {
  const int64_t pp = context.layout.pp();
  if (file == rng_file(context.rank)) return true;
  if (file.rfind("rng-rank-", 0) == 0) return false;
  for (const char* stem : {"model", "optimizer", "adapter"}) {
    for (int64_t s = 0; s < pp; ++s) {
      if (file == numbered(stem, s, pp)) {
        return s == context.stage() && context.dp_rank() == 0 && context.cp_rank() == 0 && context.tp_rank() == 0;
      }
    }
  }
  return context.rank == 0;
}

}  // namespace

int64_t checkpoint_iterations(const fs::path& dir) {
  const fs::path state_file = dir / "trainer_state.json";
  try {
    return json::parse(read_file(state_file)).at("iterations_done").get<int64_t>();
  } catch (const json::exception& e) {
    throw ConfigError(state_file.string(), "", std::string("cannot be read as a checkpoint's state: ") + e.what(),
                      damaged_checkpoint_fix(dir));
  }
}

void verify_checkpoint_files(const fs::path& dir, const RankContext& context) {
  const fs::path checksums = dir / kChecksumsFile;
  if (!fs::exists(checksums)) return;  // written before checksums existed
  ChecksumList mine;
  for (const auto& [file, digest] : parse_checksum_list(read_file(checksums), checksums.string())) {
    if (verified_here(file, context)) mine[file] = digest;
  }
  const std::string mismatch = first_checksum_mismatch(dir, mine);
  if (!mismatch.empty()) {
    throw ConfigError(dir.string(), "",
                      "cannot be resumed from: " + mismatch + " (damaged on disk, or changed since it was written)",
                      damaged_checkpoint_fix(dir));
  }
}

void save_checkpoint(const fs::path& run_dir, int64_t iterations_done, const RunSpec& run,
                     const RankContext& context, PipelineStage& stage, torch::optim::AdamW& optimizer,
                     const json& planner_state, const std::optional<SavedModelFiles>& saved_files) {
  const fs::path root = checkpoints_root(run_dir);
  const fs::path partial = root / (checkpoint_name(iterations_done) + ".partial");
  const std::string name = checkpoint_name(iterations_done);
  const auto limit = std::chrono::milliseconds(static_cast<int64_t>(run.manifest.checkpoint.write_timeout_s * 1000));
  if (context.rank == 0) {
    fs::remove_all(partial);  // left by a crash during an earlier attempt
    fs::create_directories(partial);
  }
  context.wait_for_all(name + "/folder", limit);

  const int64_t pp = context.layout.pp();
  std::vector<std::string> written;  // this rank's files, relative to the folder
  if (context.dp_rank() == 0 && context.cp_rank() == 0) {  // one copy of each stage's state
    // Under TP every TP rank of the stage takes part in gathering the whole tensors
    // (full_tensor, in the same order on each) and TP rank 0 writes them: checkpoints are
    // unsharded, HF layout, whatever the TP degree. Only the writer keeps a gathered
    // tensor, moved to the host at once: no rank holds a whole stage on its device.
    const bool writer = context.tp_rank() == 0;
    std::vector<std::pair<std::string, at::Tensor>> weights, moments, adapters;
    const auto keep = [writer](std::vector<std::pair<std::string, at::Tensor>>& into, std::string name,
                               const at::Tensor& whole) {
      if (writer) into.emplace_back(std::move(name), whole.cpu());
    };
    for (auto& [name, tensor] : stage.merged_weights()) {
      keep(weights, qwen2_hf_tensor_name(name), stage.full_tensor(name, tensor));
    }
    for (const StageParameter& p : stage.parameters()) {
      if (p.tied_copy) continue;
      const std::string hf = qwen2_hf_tensor_name(p.name);
      if (qwen2_is_lora_parameter(p.name)) {
        keep(adapters, qwen2_peft_tensor_name(p.name), stage.full_tensor(p.name, p.tensor.detach()));
      }
      auto it = optimizer.state().find(p.tensor.unsafeGetTensorImpl());
      if (it == optimizer.state().end()) continue;  // no step taken yet (on every TP rank alike)
      const auto& state = static_cast<const torch::optim::AdamWParamState&>(*it->second);
      keep(moments, hf + ".exp_avg", stage.full_tensor(p.name, state.exp_avg()));
      keep(moments, hf + ".exp_avg_sq", stage.full_tensor(p.name, state.exp_avg_sq()));
      keep(moments, hf + ".step", at::full({1}, state.step(), at::kLong));
    }
    if (writer) {
      written.push_back(numbered("model", context.stage(), pp));
      write_safetensors(partial / written.back(), weights);
      written.push_back(numbered("optimizer", context.stage(), pp));
      write_safetensors(partial / written.back(), moments);
      if (run.manifest.train.lora) {
        written.push_back(numbered("adapter", context.stage(), pp));
        write_safetensors(partial / written.back(), adapters);
      }
    }
  }
  written.push_back(rng_file(context.rank));
  write_safetensors(partial / written.back(), capture_generator_states());
  // Checksummed by the rank that wrote them, in parallel over the ranks.
  write_rank_checksums(partial, context.rank, written);
  context.wait_for_all(name + "/written", limit);
  if (context.rank == 0) {
    finish_checkpoint(root, partial, iterations_done, run, context, planner_state, saved_files);
  }
  context.wait_for_all(name + "/complete", limit);
}

CheckpointState load_checkpoint(const fs::path& dir, const RunSpec& run, const RankContext& context,
                                PipelineStage& stage, torch::optim::AdamW& optimizer) {
  verify_checkpoint_files(dir, context);
  json state;
  try {
    state = json::parse(read_file(dir / "trainer_state.json"));
  } catch (const json::exception& e) {
    throw ConfigError((dir / "trainer_state.json").string(), "", std::string("is not valid JSON: ") + e.what(),
                      damaged_checkpoint_fix(dir));
  }
  const json model = model_section_to_json(run.manifest.model);
  // Checkpoints from before model.from existed name the preset alone.
  const json saved_model = state.at("model").is_string() ? json{{"preset", state.at("model")}} : state.at("model");
  if (state.at("layout") != layout_json(context) || saved_model != model) {
    throw std::runtime_error(dir.string() + " was saved for model " + saved_model.dump() + " with layout " +
                             state.at("layout").dump() + ", not this run's " + model.dump() +
                             " with " + layout_json(context).dump() +
                             " (fix: rerun with --force to start afresh)");
  }
  // Checkpoints from before the key was saved have none.
  if (state.contains("weights") && state.at("weights") != weights_key_json(run)) {
    throw std::runtime_error(dir.string() + " was saved with seed and LoRA " + state.at("weights").dump() +
                             ", not this run's " + weights_key_json(run).dump() +
                             " (fix: rerun with --force to start afresh)");
  }
  CheckpointState result;
  result.dir = dir;
  result.iterations_done = state.at("iterations_done").get<int64_t>();
  result.planner_state = state.value("planner", json());
  const int64_t next_sample = state.at("data_cursor").at("next_sample").get<int64_t>();
  if (next_sample != result.iterations_done * run.manifest.train.global_batch_size) {
    throw std::runtime_error(dir.string() + ": data cursor " + std::to_string(next_sample) +
                             " does not follow from the iteration and global_batch_size");
  }

  // A LoRA run's frozen base is what the run starts from (seed or model.from); its
  // adapters come from the PEFT folder, the model shards hold the merged weights.
  const bool lora = run.manifest.train.lora.has_value();
  const SafetensorsCheckpoint weights = SafetensorsCheckpoint::open(dir);
  std::optional<SafetensorsFile> adapter;
  if (lora) {
    const fs::path adapter_file = dir / kAdapterFolder / "adapter_model.safetensors";
    if (!fs::exists(adapter_file)) {
      throw std::runtime_error(dir.string() + " has no " + kAdapterFolder +
                               "/adapter_model.safetensors: it was saved by a full fine-tuning run or an older "
                               "version (fix: rerun with --force to start afresh)");
    }
    adapter = SafetensorsFile::open(adapter_file);
  }
  std::vector<SafetensorsFile> optimizer_files;
  for (int64_t s = 0; s < context.layout.pp(); ++s) {
    optimizer_files.push_back(SafetensorsFile::open(dir / numbered("optimizer", s, context.layout.pp())));
  }
  const auto find_moment = [&](const std::string& name) -> const SafetensorsFile* {
    for (const SafetensorsFile& f : optimizer_files) {
      if (f.contains(name)) return &f;
    }
    return nullptr;
  };
  c10::NoGradGuard no_grad;
  // Unsharded tensors: this TP rank keeps its part of each (tensor_parallel_sharding.h).
  const int64_t tp = context.layout.tp(), tp_rank = context.tp_rank();
  const auto mine = [&](const std::string& name, const at::Tensor& full) {
    return tensor_parallel_shard(name, full, tp, tp_rank);
  };
  for (const StageParameter& p : stage.parameters()) {
    const std::string hf = qwen2_hf_tensor_name(p.name);
    if (lora && !qwen2_is_lora_parameter(p.name)) continue;
    const at::Tensor saved = mine(p.name, lora ? adapter->tensor(qwen2_peft_tensor_name(p.name)) : weights.tensor(hf));
    if (saved.sizes() != p.tensor.sizes()) {
      throw std::runtime_error(dir.string() + ": " + hf + " has shape " + c10::str(saved.sizes()) +
                               ", the model needs " + c10::str(p.tensor.sizes()));
    }
    p.tensor.copy_(saved);
    const SafetensorsFile* moments = find_moment(hf + ".exp_avg");
    if (moments == nullptr) continue;  // saved before the first optimizer step
    auto adam = std::make_unique<torch::optim::AdamWParamState>();
    adam->exp_avg(mine(p.name, moments->tensor(hf + ".exp_avg")).to(p.tensor.device()));
    adam->exp_avg_sq(mine(p.name, moments->tensor(hf + ".exp_avg_sq")).to(p.tensor.device()));
    adam->step(moments->tensor(hf + ".step").item<int64_t>());
    optimizer.state()[p.tensor.unsafeGetTensorImpl()] = std::move(adam);
  }
  restore_generator_states(generator_states_in(SafetensorsFile::open(dir / rng_file(context.rank))));
  return result;
}

}  // namespace sb
