#include "harness/latency/analytic_profile.h"

#include <algorithm>
#include <stdexcept>


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

double layer_linear_forward_flops_per_token(const Qwen2Config& c) {
  const double h = static_cast<double>(c.hidden_size);
  const double q = static_cast<double>(c.num_attention_heads * c.head_dim);
  const double kv = static_cast<double>(c.num_key_value_heads * c.head_dim);
  return 2.0 * (h * q + 2.0 * h * kv + q * h + 3.0 * h * static_cast<double>(c.intermediate_size));
}

double layer_attention_forward_flops(const Qwen2Config& c, const AttentionPattern& pattern, int64_t length,
                                     int64_t budget) {
  const double per_pair = 4.0 * static_cast<double>(c.head_dim * c.num_attention_heads);
  return per_pair * pattern.attended_pairs(length, budget) +
         pattern.selection_forward_flops(length, c.num_attention_heads, c.head_dim);
}

LatencyProfile make_analytic_profile(const Qwen2Config& config, const AttentionPattern& pattern,
                                     const std::vector<int64_t>& seq_lens, const std::vector<int64_t>& budgets,
                                     const DeviceThroughput& device) {
  if (device.peak_tflops <= 0 || device.matmul_efficiency <= 0 || device.attention_efficiency <= 0) {
    throw std::invalid_argument("analytic profile: peak and efficiencies must be > 0");
  }
  const bool budgeted = pattern.budget_axis() != BudgetAxis::kNone;
  LatencyProfile p;
  p.kind = "analytic";
  p.model = latency_profile_model_json(config);
  p.attention = pattern.name();
  for (const auto& [field, value] : pattern.profile_fields()) p.attention_fields[field] = value;
  p.device = device.name;
  p.seq_lens = seq_lens;
  p.budgets = budgeted ? budgets : std::vector<int64_t>{0};
  const double linear = layer_linear_forward_flops_per_token(config);
  const double head = 2.0 * static_cast<double>(config.hidden_size * config.vocab_size);
  for (int64_t length : seq_lens) {
    const double tokens = static_cast<double>(length);
    const double rest = ms_for(kLinearBackwardFactor * linear * tokens, device.peak_tflops, device.matmul_efficiency);
    std::vector<LatencyStat> row;
    for (int64_t k : p.budgets) {
      const double attn = ms_for(kAttentionBackwardFactor * layer_attention_forward_flops(config, pattern, length, k),
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
