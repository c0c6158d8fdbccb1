#include "harness/train/model_training_options.h"

#include "models/qwen2/qwen2_lora.h"
#include "models/qwen2/qwen2_precision.h"

namespace sb {

std::vector<at::Tensor> apply_model_training_options(Qwen2ForCausalLM& model,
                                                     const TrainSection& train) {
  model->set_precision(train.precision);
  model->set_activation_checkpointing(train.activation_checkpointing);
  if (!train.lora) return model->parameters();
  return qwen2_apply_lora(model, train.lora->options());
}

}  // namespace sb
