#include "harness/latency/analytic_profile.h"

#include <algorithm>
#include <stdexcept>

#include "kernels/attention/vertical_slash/vertical_slash_index.h"

namespace sb {
namespace {

constexpr double kLinearBackwardFactor = 3.0;
constexpr double kAttentionBackwardFactor = 3.5;

double ms_for(double flops, double tflops, double efficiency) {
  return flops / (tflops * 1e12 * efficiency) * 1e3;
}

}  // namespace

std::vector<std::string> device_throughput_preset_names() { return {"h200", "h20", "a100"}; }

DeviceThroughput device_throughput_preset(const std::string& name) {
  if (name == "h200") return {"h200", 989.0, 0.5, 0.3};
  if (name == "h20") return {"h20", 148.0, 0.5, 0.3};
  if (name == "a100") return {"a100", 312.0, 0.5, 0.3};
  throw std::invalid_argument("unknown device preset \"" + name + "\"; known: h200, h20, a100");
}

double attention_pairs(const std::string& attention, int64_t length, int64_t block_size, int64_t budget) {
  const auto l = static_cast<double>(length);
  if (attention == "dense") return l * (l + 1) / 2;
  if (attention == "vertical_slash") {
    if (budget < 1) throw std::invalid_argument("attention_pairs: budget must be >= 1");
    return l * std::min(static_cast<double>(budget), (l + 1) / 2);
  }
  if (attention != "moba") throw std::invalid_argument("attention_pairs: unknown attention \"" + attention + "\"");
  if (block_size < 1 || budget < 1) throw std::invalid_argument("attention_pairs: block size and budget must be >= 1");
  double pairs = 0;
  const int64_t blocks = (length + block_size - 1) / block_size;
  for (int64_t j = 0; j < blocks; ++j) {
    const int64_t queries = std::min(block_size, length - j * block_size);
    const auto q = static_cast<double>(queries);
    const int64_t earlier = std::min(budget - 1, j);  // selected blocks before the diagonal one
    pairs += q * (q + 1) / 2 + q * static_cast<double>(earlier * block_size);
  }
  return pairs;
}

double layer_linear_forward_flops_per_token(const Qwen2Config& c) {
  const double h = static_cast<double>(c.hidden_size);
  const double q = static_cast<double>(c.num_attention_heads * c.head_dim);
  const double kv = static_cast<double>(c.num_key_value_heads * c.head_dim);
  return 2.0 * (h * q + 2.0 * h * kv + q * h + 3.0 * h * static_cast<double>(c.intermediate_size));
}

double layer_attention_forward_flops(const Qwen2Config& c, const std::string& attention, int64_t length,
                                     int64_t block_size, int64_t budget, int64_t last_queries) {
  const double per_pair = 4.0 * static_cast<double>(c.head_dim * c.num_attention_heads);
  double flops = per_pair * attention_pairs(attention, length, block_size, budget);
  if (attention == "moba") {
    const double blocks = static_cast<double>((length + block_size - 1) / block_size);
    flops += 2.0 * static_cast<double>(c.head_dim * c.num_attention_heads) * blocks * (blocks + 1) / 2;
  }
  if (attention == "vertical_slash") {
    flops += 2.0 * static_cast<double>(c.head_dim * c.num_attention_heads) *
             static_cast<double>(std::min(last_queries, length)) * static_cast<double>(length);
  }
  return flops;
}

LatencyProfile make_analytic_profile(const Qwen2Config& config, const std::string& attention,
                                     int64_t block_size, const std::vector<int64_t>& seq_lens,
                                     const std::vector<int64_t>& budgets, const DeviceThroughput& device,
                                     const VerticalSlashParams* vertical_slash) {
  if (device.peak_tflops <= 0 || device.matmul_efficiency <= 0 || device.attention_efficiency <= 0) {
    throw std::invalid_argument("analytic profile: peak and efficiencies must be > 0");
  }
  const bool vs = attention == "vertical_slash";
  if (vs && vertical_slash == nullptr) {
    throw std::invalid_argument("analytic profile: vertical_slash attention needs the pattern's parameters");
  }
  LatencyProfile p;
  p.kind = "analytic";
  p.model = latency_profile_model_json(config);
  p.attention = attention;
  p.block_size = attention == "moba" ? block_size : 0;
  if (vs) {
    p.block_size = vertical_slash->block_size;
    p.last_queries = vertical_slash->last_queries;
    p.sink_tokens = vertical_slash->sink_tokens;
    p.local_window = vertical_slash->local_window;
    p.max_verticals = vertical_slash->max_verticals;
    p.max_slashes = vertical_slash->max_slashes;
  }
  p.device = device.name;
  p.seq_lens = seq_lens;
  p.budgets = attention == "moba" || vs ? budgets : std::vector<int64_t>{0};
  const double linear = layer_linear_forward_flops_per_token(config);
  const double head = 2.0 * static_cast<double>(config.hidden_size * config.vocab_size);
  for (int64_t length : seq_lens) {
    const double tokens = static_cast<double>(length);
    const double rest = ms_for(kLinearBackwardFactor * linear * tokens, device.peak_tflops, device.matmul_efficiency);
    std::vector<LatencyStat> row;
    for (int64_t k : p.budgets) {
      const double attn = ms_for(
          kAttentionBackwardFactor * layer_attention_forward_flops(config, attention, length, block_size, k,
                                                                   vs ? vertical_slash->last_queries : 64),
          device.peak_tflops, device.attention_efficiency);
      row.push_back(LatencyStat{rest + attn, 0, {}});
    }
    p.layer_ms.push_back(std::move(row));
    p.rest_ms.push_back(LatencyStat{rest, 0, {}});
    p.head_ms.push_back(LatencyStat{ms_for(kLinearBackwardFactor * head * tokens, device.peak_tflops,
                                           device.matmul_efficiency),
                                    0, {}});
  }
  p.context = {{"flop_model", "harness/latency/analytic_profile.h"},
               {"peak_tflops", device.peak_tflops},
               {"matmul_efficiency", device.matmul_efficiency},
               {"attention_efficiency", device.attention_efficiency},
               {"linear_backward_factor", kLinearBackwardFactor},
               {"attention_backward_factor", kAttentionBackwardFactor}};
  p.validate();
  return p;
}

}  // namespace sb
