#pragma once
// The manifest's model-level training options, applied in one place: train.lora
// (adapters, base frozen), train.precision (fp32 | bf16-mixed) and
// train.activation_checkpointing. The trainer calls this once, right after building
// the model, and hands the returned parameters to the optimizer.

#include <ATen/core/Tensor.h>

#include <vector>

#include "harness/config/manifest.h"
#include "models/qwen2/qwen2_model.h"

namespace sb {

// Patches `model` as `train` asks and returns the parameters to train: the LoRA
// adapter weights when train.lora is present (every other parameter frozen), all
// parameters otherwise. LoRA's A matrices are drawn from the global generator, so
// call it at the same point of a seeded run for reproducible weights.
std::vector<at::Tensor> apply_model_training_options(Qwen2ForCausalLM& model,
                                                     const TrainSection& train);

}  // namespace sb
