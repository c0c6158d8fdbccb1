#include "kernels/attention/core/dense_attention.h"

#include <ATen/ATen.h>

#include <cmath>
#include <vector>

namespace sb {
namespace {

// cached: q holds the last q.size(0) of the k.size(0) positions (decoding with a
// cache); otherwise q, k and v cover the same packed tokens.
void dense_attention_check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  double scale, bool cached) {
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3,
              "dense attention: q, k, v must be [T, H, D]; got q ", q.sizes(), ", k ", k.sizes(),
              ", v ", v.sizes());
  TORCH_CHECK(k.sizes() == v.sizes(), "dense attention: k ", k.sizes(), " and v ", v.sizes(),
              " must have the same shape");
  if (cached) {
    TORCH_CHECK(q.size(0) <= k.size(0), "dense attention (cached): ", q.size(0),
                " new queries but only ", k.size(0), " cached keys");
  } else {
    TORCH_CHECK(q.size(0) == k.size(0), "dense attention: q has ", q.size(0),
                " tokens but k has ", k.size(0));
  }
  TORCH_CHECK(q.size(2) == k.size(2), "dense attention: q head_dim ", q.size(2),
              " differs from k head_dim ", k.size(2));
  TORCH_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, "dense attention: query heads (",
              q.size(1), ") must be a multiple of key/value heads (", k.size(1), ")");
  TORCH_CHECK(at::isFloatingType(q.scalar_type()),
              "dense attention: q must be floating point, got ", q.scalar_type());
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
              "dense attention: q, k, v must share one dtype; got ", q.scalar_type(), ", ",
              k.scalar_type(), ", ", v.scalar_type());
  TORCH_CHECK(k.device() == q.device() && v.device() == q.device(),
              "dense attention: q, k, v must be on one device; got ", q.device(), ", ", k.device(),
              ", ", v.device());
  TORCH_CHECK(std::isfinite(scale) && scale > 0.0, "dense attention: scale must be positive, got ",
              scale);
}

// [L, H, D] -> [1, H, L, D], the layout scaled_dot_product_attention expects.
at::Tensor to_batch_heads_first(const at::Tensor& x) { return x.transpose(0, 1).unsqueeze(0); }

}  // namespace

at::Tensor dense_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const PackedSequences& sequences, double scale) {
  dense_attention_check_inputs(q, k, v, scale, /*cached=*/false);
  sequences.check(q.size(0));
  // enable_gqa makes SDPA map query head h to key/value head h / (Hq / Hkv), the
  // grouping the interface defines, without materialising repeated k and v.
  const bool grouped = q.size(1) != k.size(1);

  std::vector<at::Tensor> outputs;  // one [L, Hq, D] per non-empty sequence
  outputs.reserve(sequences.num_sequences());
  for (int64_t i = 0; i < sequences.num_sequences(); ++i) {
    const int64_t begin = sequences.offsets[i];
    const int64_t end = sequences.offsets[i + 1];
    if (begin == end) continue;
    at::Tensor out = at::scaled_dot_product_attention(
        to_batch_heads_first(q.slice(0, begin, end)), to_batch_heads_first(k.slice(0, begin, end)),
        to_batch_heads_first(v.slice(0, begin, end)), /*attn_mask=*/{}, /*dropout_p=*/0.0,
        /*is_causal=*/true, scale, grouped);  // [1, Hq, L, D]
    outputs.push_back(out.squeeze(0).transpose(0, 1));
  }
  // T == 0: an empty result that still belongs to q's autograd graph.
  if (outputs.empty()) return q.clone();
  if (outputs.size() == 1) return outputs.front().contiguous();
  return at::cat(outputs, 0);  // [T, Hq, D]
}

at::Tensor dense_causal_attention_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                         double scale) {
  dense_attention_check_inputs(q, k, v, scale, /*cached=*/true);
  const int64_t n = q.size(0);
  const int64_t cached = k.size(0);
  const bool grouped = q.size(1) != k.size(1);
  // A whole prompt (n = L) is plain causal attention and a single new token reads every
  // key: both run SDPA's fused kernel without a mask, so a 128K-token prefill holds no
  // [n, L] matrix.
  if (n == cached || n == 1) {
    const at::Tensor out = at::scaled_dot_product_attention(
        to_batch_heads_first(q), to_batch_heads_first(k), to_batch_heads_first(v), /*attn_mask=*/{},
        /*dropout_p=*/0.0, /*is_causal=*/n > 1, scale, grouped);
    return out.squeeze(0).transpose(0, 1).contiguous();  // [n, Hq, D]
  }
  // A chunk after a cached prefix: query i (absolute position cached - n + i) may read
  // keys 0 .. cached - n + i (SDPA's is_causal aligns the other corner).
  const auto index_options = at::TensorOptions().dtype(at::kLong).device(q.device());
  const at::Tensor query_pos = at::arange(cached - n, cached, index_options).unsqueeze(1);  // [n, 1]
  const at::Tensor key_pos = at::arange(0, cached, index_options).unsqueeze(0);             // [1, L]
  const at::Tensor allowed = key_pos.le(query_pos);                                         // [n, L]
  const at::Tensor out = at::scaled_dot_product_attention(
      to_batch_heads_first(q), to_batch_heads_first(k), to_batch_heads_first(v), allowed,
      /*dropout_p=*/0.0, /*is_causal=*/false, scale, grouped);
  return out.squeeze(0).transpose(0, 1).contiguous();  // [n, Hq, D]
}

at::Tensor dense_causal_reference_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                                       int64_t first_row) {
  const int64_t length = q.size(0), rows = length - first_row, group = q.size(1) / k.size(1);
  TORCH_CHECK(first_row >= 0 && first_row <= length, "dense reference: first_row ", first_row, " outside [0, ", length, "]");
  const at::Tensor qr = q.narrow(0, first_row, rows).to(at::kCPU, at::kDouble).permute({1, 0, 2});             // [Hq, r, D]
  const at::Tensor kk = k.to(at::kCPU, at::kDouble).repeat_interleave(group, 1).permute({1, 2, 0});         // [Hq, D, L]
  const at::Tensor vv = v.to(at::kCPU, at::kDouble).repeat_interleave(group, 1).permute({1, 0, 2});         // [Hq, L, D]
  const at::Tensor query_pos = at::arange(first_row, length, at::kLong).unsqueeze(1);                       // [r, 1]
  const at::Tensor key_pos = at::arange(0, length, at::kLong).unsqueeze(0);                                 // [1, L]
  const at::Tensor scores = at::matmul(qr, kk).mul(scale).masked_fill(key_pos.gt(query_pos), -INFINITY);  // [Hq, r, L]
  return at::matmul(at::softmax(scores, -1), vv).permute({1, 0, 2}).contiguous();                          // [r, Hq, D]
}

}  // namespace sb
