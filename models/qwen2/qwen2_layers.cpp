#include <ATen/ATen.h>

#include <cmath>

#include "models/qwen2/qwen2_model.h"

namespace sb {

Qwen2RMSNormImpl::Qwen2RMSNormImpl(int64_t hidden_size, double eps) : eps_(eps) {
  weight = register_parameter("weight", at::ones({hidden_size}));
}

at::Tensor Qwen2RMSNormImpl::forward(const at::Tensor& x) {
  // HF upcasts to float32; promoting instead keeps float64 (test) runs in float64 and
  // is the same thing for float32, float16 and bfloat16.
  const at::ScalarType stat_type = at::promote_types(x.scalar_type(), at::kFloat);
  const at::Tensor xf = x.to(stat_type);  // [..., H]
  const at::Tensor inv_rms =
      (xf.square().mean(/*dim=*/{-1}, /*keepdim=*/true) + eps_).rsqrt();  // [..., 1]
  return weight * (xf * inv_rms).to(x.scalar_type());
}

Qwen2AttentionImpl::Qwen2AttentionImpl(const Qwen2Config& config, int64_t layer_index)
    : num_heads_(config.num_attention_heads),
      num_kv_heads_(config.num_key_value_heads),
      head_dim_(config.head_dim),
      layer_index_(layer_index) {
  const int64_t h = config.hidden_size;
  q_proj = register_module("q_proj", Qwen2Linear(h, num_heads_ * head_dim_, /*bias=*/true));
  k_proj = register_module("k_proj", Qwen2Linear(h, num_kv_heads_ * head_dim_, /*bias=*/true));
  v_proj = register_module("v_proj", Qwen2Linear(h, num_kv_heads_ * head_dim_, /*bias=*/true));
  o_proj = register_module("o_proj", Qwen2Linear(num_heads_ * head_dim_, h, /*bias=*/false));
}

at::Tensor Qwen2AttentionImpl::forward(const at::Tensor& x, const at::Tensor& cos,
                                       const at::Tensor& sin, const PackedSequences& sequences,
                                       AttentionBackend& backend) {
  // Head counts from the projections: under tensor parallelism they hold this rank's
  // heads only (Hq / tp and Hkv / tp), and o_proj then returns partial sums. Explicit
  // sizes, not -1: a context-parallel rank may hold no token of a micro-batch (T = 0).
  const int64_t tokens = x.size(0);
  const auto heads_of = [&](const at::Tensor& projected) {  // [T, heads x D] -> [T, heads, D]
    return projected.view({tokens, projected.size(1) / head_dim_, head_dim_});
  };
  const at::Tensor q = heads_of(q_proj->forward(x));  // [T, Hq, D]
  const at::Tensor k = heads_of(k_proj->forward(x));  // [T, Hkv, D]
  const at::Tensor v = heads_of(v_proj->forward(x));  // [T, Hkv, D]
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  const at::Tensor attended =
      backend.forward(qwen2_apply_rotary(q, cos, sin), qwen2_apply_rotary(k, cos, sin), v,
                      sequences, scale, layer_index_);  // [T, Hq, D]
  return o_proj->forward(attended.reshape({tokens, attended.size(1) * attended.size(2)}));  // [T, H]
}

at::Tensor Qwen2AttentionImpl::forward_cached(const at::Tensor& x, const at::Tensor& cos,
                                              const at::Tensor& sin, at::Tensor& cache_k,
                                              at::Tensor& cache_v, AttentionBackend& backend) {
  const int64_t tokens = x.size(0);
  const at::Tensor q = q_proj->forward(x).view({tokens, num_heads_, head_dim_});     // [n, Hq, D]
  const at::Tensor k = k_proj->forward(x).view({tokens, num_kv_heads_, head_dim_});  // [n, Hkv, D]
  const at::Tensor v = v_proj->forward(x).view({tokens, num_kv_heads_, head_dim_});  // [n, Hkv, D]
  const at::Tensor k_rotated = qwen2_apply_rotary(k, cos, sin);
  cache_k = cache_k.defined() ? at::cat({cache_k, k_rotated}, 0) : k_rotated;  // [L, Hkv, D]
  cache_v = cache_v.defined() ? at::cat({cache_v, v}, 0) : v.contiguous();     // [L, Hkv, D]
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  const at::Tensor attended =
      backend.forward_cached(qwen2_apply_rotary(q, cos, sin), cache_k, cache_v, scale);
  return o_proj->forward(attended.reshape({tokens, num_heads_ * head_dim_}));  // [n, H]
}

Qwen2MLPImpl::Qwen2MLPImpl(const Qwen2Config& config) {
  const int64_t h = config.hidden_size;
  const int64_t i = config.intermediate_size;
  gate_proj = register_module("gate_proj", Qwen2Linear(h, i, /*bias=*/false));
  up_proj = register_module("up_proj", Qwen2Linear(h, i, /*bias=*/false));
  down_proj = register_module("down_proj", Qwen2Linear(i, h, /*bias=*/false));
}

at::Tensor Qwen2MLPImpl::forward(const at::Tensor& x) {
  return down_proj->forward(at::silu(gate_proj->forward(x)) * up_proj->forward(x));  // [T, H]
}

Qwen2DecoderLayerImpl::Qwen2DecoderLayerImpl(const Qwen2Config& config, int64_t layer_index) {
  input_layernorm =
      register_module("input_layernorm", Qwen2RMSNorm(config.hidden_size, config.rms_norm_eps));
  self_attn = register_module("self_attn", Qwen2Attention(config, layer_index));
  post_attention_layernorm = register_module("post_attention_layernorm",
                                             Qwen2RMSNorm(config.hidden_size, config.rms_norm_eps));
  mlp = register_module("mlp", Qwen2MLP(config));
}

at::Tensor Qwen2DecoderLayerImpl::forward(const at::Tensor& x, const at::Tensor& cos,
                                          const at::Tensor& sin, const PackedSequences& sequences,
                                          AttentionBackend& backend) {
  if (sequence_parallel_) {
    // x [L, H]: this rank's rows of the stream; cos has a row per token of the whole batch.
    Qwen2SequenceParallel& sp = *sequence_parallel_;
    const int64_t tokens = cos.size(0);
    const at::Tensor attended =
        self_attn->forward(sp.gather(input_layernorm->forward(x), tokens), cos, sin, sequences, backend);  // [T, H]
    const at::Tensor h = x + sp.scatter(attended);                                                      // [L, H]
    return h + sp.scatter(mlp->forward(sp.gather(post_attention_layernorm->forward(h), tokens)));     // [L, H]
  }
  const at::Tensor h =
      x + self_attn->forward(input_layernorm->forward(x), cos, sin, sequences, backend);  // [T, H]
  return h + mlp->forward(post_attention_layernorm->forward(h));                          // [T, H]
}

at::Tensor Qwen2DecoderLayerImpl::forward_cached(const at::Tensor& x, const at::Tensor& cos,
                                                 const at::Tensor& sin, at::Tensor& cache_k,
                                                 at::Tensor& cache_v, AttentionBackend& backend) {
  const at::Tensor h = x + self_attn->forward_cached(input_layernorm->forward(x), cos, sin,
                                                     cache_k, cache_v, backend);  // [n, H]
  return h + mlp->forward(post_attention_layernorm->forward(h));                 // [n, H]
}

}  // namespace sb
