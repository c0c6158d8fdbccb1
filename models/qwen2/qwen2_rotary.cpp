#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "models/qwen2/qwen2_model.h"

namespace sb {

std::pair<at::Tensor, at::Tensor> qwen2_rotary_tables(const at::Tensor& position_ids,
                                                      int64_t head_dim, double theta) {
  TORCH_CHECK(position_ids.dim() == 1, "qwen2_rotary_tables: position_ids must be [T], got ",
              position_ids.sizes());
  TORCH_CHECK(head_dim > 0 && head_dim % 2 == 0,
              "qwen2_rotary_tables: head_dim must be positive and even, got ", head_dim);
  // inv_freq in float32 in the same operation order as HF's Qwen2RotaryEmbedding, so
  // that tables (and hence checkpoints' outputs) agree bit for bit.
  const auto float_options = at::TensorOptions().dtype(at::kFloat).device(position_ids.device());
  const at::Tensor exponents =
      at::arange(0, head_dim, 2, float_options.dtype(at::kLong)).to(at::kFloat) /
      static_cast<double>(head_dim);                                   // [D/2]
  const at::Tensor inv_freq = at::pow(theta, exponents).reciprocal();  // [D/2]
  const at::Tensor freqs =
      position_ids.to(at::kFloat).unsqueeze(1) * inv_freq.unsqueeze(0);  // [T, D/2]
  const at::Tensor angles = at::cat({freqs, freqs}, /*dim=*/-1);         // [T, D]
  return {angles.cos(), angles.sin()};
}

namespace {

// The dimension (of `dim`) whose wavelength turns `rotations` times over `positions`.
double yarn_correction_dim(double rotations, int64_t dim, double base, int64_t positions) {
  return (static_cast<double>(dim) * std::log(static_cast<double>(positions) / (rotations * 2.0 * M_PI))) /
         (2.0 * std::log(base));
}

// YaRN's inverse frequencies [D/2] (float32): interpolated by `factor` for the low
// frequencies, kept for the high ones, linearly blended between the dimensions where
// the original context turns beta_fast and beta_slow times.
at::Tensor yarn_inverse_frequencies(const Qwen2Config& config, const at::TensorOptions& float_options) {
  const Qwen2YarnScaling& y = *config.yarn;
  const int64_t dim = config.head_dim;
  const at::Tensor exponents =
      at::arange(0, dim, 2, float_options.dtype(at::kLong)).to(at::kFloat) / static_cast<double>(dim);  // [D/2]
  const at::Tensor pos_freqs = at::pow(config.rope_theta, exponents);                                 // [D/2]
  const at::Tensor extrapolation = pos_freqs.reciprocal();
  const at::Tensor interpolation = (pos_freqs * y.factor).reciprocal();
  double low = yarn_correction_dim(y.beta_fast, dim, config.rope_theta, y.original_max_position_embeddings);
  double high = yarn_correction_dim(y.beta_slow, dim, config.rope_theta, y.original_max_position_embeddings);
  if (y.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // as transformers: no zero-width ramp
  const at::Tensor ramp =
      ((at::arange(dim / 2, float_options) - low) / (high - low)).clamp(0.0, 1.0);  // [D/2]
  const at::Tensor extrapolation_weight = at::rsub(ramp, 1);
  return interpolation * at::rsub(extrapolation_weight, 1) + extrapolation * extrapolation_weight;
}

// [..., D] -> [..., D]: (x1, x2) -> (-x2, x1) with x1, x2 the two halves of the last axis.
at::Tensor qwen2_rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, /*dim=*/-1);
}

}  // namespace

std::pair<at::Tensor, at::Tensor> qwen2_rotary_tables(const at::Tensor& position_ids, const Qwen2Config& config) {
  if (!config.yarn) return qwen2_rotary_tables(position_ids, config.head_dim, config.rope_theta);
  TORCH_CHECK(position_ids.dim() == 1, "qwen2_rotary_tables: position_ids must be [T], got ",
              position_ids.sizes());
  const auto float_options = at::TensorOptions().dtype(at::kFloat).device(position_ids.device());
  const at::Tensor inv_freq = yarn_inverse_frequencies(config, float_options);  // [D/2]
  const at::Tensor freqs = position_ids.to(at::kFloat).unsqueeze(1) * inv_freq.unsqueeze(0);  // [T, D/2]
  const at::Tensor angles = at::cat({freqs, freqs}, /*dim=*/-1);                               // [T, D]
  return {angles.cos() * config.yarn->attention_factor, angles.sin() * config.yarn->attention_factor};
}

at::Tensor qwen2_apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  TORCH_CHECK(x.dim() == 3, "qwen2_apply_rotary: x must be [T, H, D], got ", x.sizes());
  TORCH_CHECK(cos.dim() == 2 && cos.sizes() == sin.sizes() && cos.size(0) == x.size(0) &&
                  cos.size(1) == x.size(2),
              "qwen2_apply_rotary: cos, sin must be [T, D] = [", x.size(0), ", ", x.size(2),
              "], got ", cos.sizes(), " and ", sin.sizes());
  // HF casts the tables to the activation dtype before rotating; bf16 runs round the
  // same way.
  const at::Tensor c = cos.to(x.scalar_type()).unsqueeze(1);  // [T, 1, D]
  const at::Tensor s = sin.to(x.scalar_type()).unsqueeze(1);  // [T, 1, D]
  return x * c + qwen2_rotate_half(x) * s;                    // [T, H, D]
}

}  // namespace sb
