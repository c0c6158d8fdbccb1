// Helper for tests/python/test_model_oracle.py (the transformers oracle):
//   sb_model_oracle grads MODEL_DIR IDS_JSON OUT.safetensors
//       loads the checkpoint, computes the token-mean cross-entropy of the ids
//       ([[...], [...]] several sequences, packed into one micro-batch) and writes the
//       loss ("loss", float64 scalar) and every parameter's gradient under its HF name.
//   sb_model_oracle save MODEL_DIR OUT_DIR
//       loads the checkpoint and saves it again through qwen2_save_hf_checkpoint.
//   sb_model_oracle lora MODEL_DIR OPTIONS_JSON OUT_DIR
//       OPTIONS_JSON: {"rank", "alpha", "dropout", "target_modules", "seed", "ids"}.
//       Loads the checkpoint, adds LoRA adapters (seeded), gives B random weights (as
//       training would), and writes OUT_DIR/logits.safetensors ("logits" [T, V] of the
//       ids in eval mode), OUT_DIR/merged (HF layout) and OUT_DIR/adapter (PEFT layout).
//   sb_model_oracle logits MODEL_DIR IDS_JSON PRECISION OUT.safetensors
//       "logits" [T, V] of one sequence ([...]) under PRECISION (fp32 | bf16-mixed).
// Exit 0 on success; 1 with the error on stderr.

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <c10/core/GradMode.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "harness/data/packed_microbatch.h"
#include "kernels/attention/core/attention_backend.h"
#include "models/qwen2/qwen2_hf_checkpoint.h"
#include "models/qwen2/qwen2_lora.h"
#include "models/safetensors/safetensors_writer.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"

namespace {

// Logits [T, V] of one sequence, without grad.
at::Tensor sequence_logits(sb::Qwen2ForCausalLM& model, const std::vector<int64_t>& ids) {
  c10::NoGradGuard no_grad;
  const auto n = static_cast<int64_t>(ids.size());
  return model->forward(at::tensor(ids, at::kLong), at::arange(n, at::kLong),
                        sb::PackedSequences::from_lengths({n}));
}

int write_gradients(const std::string& model_dir, const std::string& ids_json,
                    const std::string& out) {
  sb::Qwen2ForCausalLM model = sb::qwen2_load_hf_model(model_dir, sb::dense_attention_options().make_backend());
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

int lora(const std::string& model_dir, const std::string& options_json, const std::string& out_dir) {
  sb::Qwen2ForCausalLM model = sb::qwen2_load_hf_model(model_dir, sb::dense_attention_options().make_backend());
  std::ifstream in(options_json);
  const auto options = nlohmann::json::parse(in);
  at::manual_seed(options.at("seed").get<uint64_t>());
  sb::qwen2_apply_lora(model, {options.at("rank").get<int64_t>(), options.at("alpha").get<double>(),
                               options.at("dropout").get<double>(),
                               options.at("target_modules").get<std::vector<std::string>>()});
  {
    c10::NoGradGuard no_grad;
    for (const auto& item : model->named_parameters(true)) {
      if (item.key().find(".lora_B.") != std::string::npos) item.value().normal_(0.0, 0.05);
    }
  }
  model->eval();
  const auto ids = options.at("ids").get<std::vector<int64_t>>();
  const at::Tensor logits = sequence_logits(model, ids);
  std::filesystem::create_directories(out_dir);
  sb::write_safetensors(std::filesystem::path(out_dir) / "logits.safetensors", {{"logits", logits}});
  sb::qwen2_save_hf_checkpoint(model, std::filesystem::path(out_dir) / "merged");
  sb::qwen2_save_lora_adapter(model, std::filesystem::path(out_dir) / "adapter", model_dir);
  return 0;
}

int precision_logits(const std::string& model_dir, const std::string& ids_json,
                     const std::string& precision, const std::string& out) {
  sb::Qwen2ForCausalLM model = sb::qwen2_load_hf_model(model_dir, sb::dense_attention_options().make_backend());
  model->eval();
  model->set_precision(sb::qwen2_precision_from_name(precision));
  std::ifstream in(ids_json);
  const auto ids = nlohmann::json::parse(in).get<std::vector<int64_t>>();
  sb::write_safetensors(out, {{"logits", sequence_logits(model, ids)}});
  return 0;
}

int save_again(const std::string& model_dir, const std::string& out_dir) {
  sb::Qwen2ForCausalLM model = sb::qwen2_load_hf_model(model_dir, sb::dense_attention_options().make_backend());
  sb::qwen2_save_hf_checkpoint(model, out_dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string command = argc > 1 ? argv[1] : "";
    if (command == "grads" && argc == 5) return write_gradients(argv[2], argv[3], argv[4]);
    if (command == "save" && argc == 4) return save_again(argv[2], argv[3]);
    if (command == "lora" && argc == 5) return lora(argv[2], argv[3], argv[4]);
    if (command == "logits" && argc == 6) return precision_logits(argv[2], argv[3], argv[4], argv[5]);
    std::cerr << "usage: sb_model_oracle grads MODEL_DIR IDS_JSON OUT.safetensors\n"
                 "       sb_model_oracle save MODEL_DIR OUT_DIR\n"
                 "       sb_model_oracle lora MODEL_DIR OPTIONS_JSON OUT_DIR\n"
                 "       sb_model_oracle logits MODEL_DIR IDS_JSON PRECISION OUT.safetensors\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "sb_model_oracle: " << e.what() << "\n";
    return 1;
  }
}
