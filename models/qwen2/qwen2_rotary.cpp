#include <ATen/ATen.h>

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

// [..., D] -> [..., D]: (x1, x2) -> (-x2, x1) with x1, x2 the two halves of the last axis.
at::Tensor qwen2_rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, /*dim=*/-1);
}

}  // namespace

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
