#include "harness/report/training_flops.h"

#include <algorithm>
#include <cctype>

namespace sb {

double training_model_flops(const Qwen2Config& c, const std::vector<int64_t>& sequence_lengths) {
  const double hidden = static_cast<double>(c.hidden_size), head = static_cast<double>(c.head_dim);
  const double q = static_cast<double>(c.num_attention_heads) * head;
  const double kv = static_cast<double>(c.num_key_value_heads) * head;
  // q, k, v, o and the three MLP projections of one layer.
  const double layer_weights = hidden * q + 2 * hidden * kv + q * hidden + 3 * hidden * static_cast<double>(c.intermediate_size);
  const double layers = static_cast<double>(c.num_hidden_layers);
  double tokens = 0, causal_pairs = 0;
  for (int64_t n : sequence_lengths) {
    tokens += static_cast<double>(n);
    causal_pairs += static_cast<double>(n) * static_cast<double>(n + 1) / 2;
  }
  const double forward = 2 * tokens * layer_weights * layers                                  // projections
                         + 4 * head * causal_pairs * static_cast<double>(c.num_attention_heads) * layers  // attention
                         + 2 * tokens * hidden * static_cast<double>(c.vocab_size);                    // head
  return 3 * forward;
}

std::optional<double> known_gpu_peak_tflops(const std::string& gpu_name) {
  std::string name = gpu_name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::toupper(ch); });
  const auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  if (has("H100")) return has("PCIE") ? 756.0 : 989.0;
  if (has("H200")) return 989.0;
  if (has("H20")) return 148.0;  // after H200, whose name contains it
  if (has("B200")) return 2250.0;
  if (has("A100")) return 312.0;
  return std::nullopt;
}

}  // namespace sb
