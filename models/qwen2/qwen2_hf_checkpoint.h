#pragma once
// Qwen2 models from and to HF checkpoint folders (config.json + safetensors, single
// file or sharded). The mapping of names is explicit: the module path of a parameter
// here plus the prefix "model." is the HF name, except lm_head.weight, which HF keeps
// at the top level (absent from checkpoints whose head is tied to the embedding).

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention/core/attention_backend.h"
#include "models/qwen2/qwen2_model.h"

namespace sb {

class SafetensorsCheckpoint;

// HF name of a parameter of Qwen2ForCausalLM ("layers.0.mlp.up_proj.weight" ->
// "model.layers.0.mlp.up_proj.weight"; "lm_head.weight" stays).
std::string qwen2_hf_tensor_name(const std::string& parameter_name);

// Copies every parameter from the checkpoint (converting BF16/F16/F32 to the
// parameter's dtype). Missing or unexpected tensors and shape mismatches throw
// std::runtime_error naming the checkpoint folder and the tensors. A checkpoint of a
// tied model may still carry lm_head.weight; it is ignored, as transformers does.
// The model must not have LoRA adapters yet (std::logic_error).
// wanted (module-path names, "layers.3.mlp.up_proj.weight"): when set, only the
// parameters it accepts are read (a pipeline stage reads its own layers); the others
// keep their values and may be absent from the checkpoint. Names that belong to no
// parameter of the model are still errors.
void qwen2_load_hf_weights(Qwen2ForCausalLM& model, const SafetensorsCheckpoint& checkpoint,
                           const std::function<bool(const std::string&)>& wanted = {});

// config.json + weights of `dir` -> a model using `backend`.
Qwen2ForCausalLM qwen2_load_hf_model(const std::filesystem::path& dir,
                                     std::shared_ptr<AttentionBackend> backend);

// Writes config.json and model.safetensors (float32, HF names) into `dir`, which must
// not exist yet: everything is written into a temporary sibling folder that is renamed
// into place at the end, so a reader never sees half a checkpoint. LoRA adapters are
// merged into their projections' weights (qwen2_merged_named_parameters), so the
// folder is a plain Qwen2 checkpoint.
void qwen2_save_hf_checkpoint(Qwen2ForCausalLM& model, const std::filesystem::path& dir);

}  // namespace sb
