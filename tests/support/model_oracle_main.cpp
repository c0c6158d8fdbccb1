// Helper for tests/python/test_model_oracle.py (the transformers oracle):
//   sb_model_oracle grads MODEL_DIR IDS_JSON OUT.safetensors
//       loads the checkpoint, computes the token-mean cross-entropy of the ids
//       ([[...], [...]] several sequences, packed into one micro-batch) and writes the
//       loss ("loss", float64 scalar) and every parameter's gradient under its HF name.
//   sb_model_oracle save MODEL_DIR OUT_DIR
//       loads the checkpoint and saves it again through qwen2_save_hf_checkpoint.
// Exit 0 on success; 1 with the error on stderr.

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>

#include "harness/train/packed_microbatch.h"
#include "kernels/attention/attention_backend.h"
#include "models/qwen2/qwen2_hf_checkpoint.h"
#include "models/safetensors/safetensors_writer.h"

namespace {

int write_gradients(const std::string& model_dir, const std::string& ids_json,
                    const std::string& out) {
  sb::Qwen2ForCausalLM model = sb::qwen2_load_hf_model(model_dir, sb::make_attention_backend("dense"));
  model->train();
  std::ifstream in(ids_json);
  const auto sequences = nlohmann::json::parse(in).get<std::vector<std::vector<int64_t>>>();
  std::vector<sb::Sample> samples;
  for (const auto& ids : sequences) samples.push_back(sb::Sample{0, ids, /*prompt_tokens=*/1});
  std::vector<const sb::Sample*> members;
  for (const auto& s : samples) members.push_back(&s);
  const sb::PackedMicroBatch mb = sb::pack_microbatch(members);
  const at::Tensor logits = model->forward(mb.tokens, mb.position_ids, mb.sequences);
  const at::Tensor loss = at::cross_entropy_loss(logits, mb.labels, {}, at::Reduction::Sum,
                                                 sb::kIgnoreLabel) /
                          static_cast<double>(mb.loss_tokens);
  loss.backward();
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  tensors.emplace_back("loss", loss.detach().to(at::kDouble));
  for (const auto& item : model->named_parameters(true)) {
    tensors.emplace_back(sb::qwen2_hf_tensor_name(item.key()), item.value().grad());
  }
  sb::write_safetensors(out, tensors);
  return 0;
}

int save_again(const std::string& model_dir, const std::string& out_dir) {
  sb::Qwen2ForCausalLM model = sb::qwen2_load_hf_model(model_dir, sb::make_attention_backend("dense"));
  sb::qwen2_save_hf_checkpoint(model, out_dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string command = argc > 1 ? argv[1] : "";
    if (command == "grads" && argc == 5) return write_gradients(argv[2], argv[3], argv[4]);
    if (command == "save" && argc == 4) return save_again(argv[2], argv[3]);
    std::cerr << "usage: sb_model_oracle grads MODEL_DIR IDS_JSON OUT.safetensors\n"
                 "       sb_model_oracle save MODEL_DIR OUT_DIR\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "sb_model_oracle: " << e.what() << "\n";
    return 1;
  }
}
