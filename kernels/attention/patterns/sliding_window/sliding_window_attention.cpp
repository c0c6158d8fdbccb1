#include "kernels/attention/patterns/sliding_window/sliding_window_attention.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "kernels/attention/core/dense_attention.h"

namespace sb {
namespace {

// One sequence: q [L, Hq, D], k, v [L, Hkv, D].
at::Tensor attend_sequence(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t window,
                           int64_t sinks, double scale) {
  const int64_t length = q.size(0);
  if (window >= length) return dense_causal_attention(q, k, v, PackedSequences::from_lengths({length}), scale);
  const int64_t kv_heads = k.size(1), group = q.size(1) / kv_heads, dim = q.size(2);
  const int64_t tile = std::min(kSlidingWindowTile, length);
  const int64_t tiles = (length + tile - 1) / tile, padded = tiles * tile;
  const int64_t reach = window + tile - 1;  // keys one tile's window can reach
  const int64_t sink_count = std::min(sinks, length);
  const auto index = at::TensorOptions().dtype(at::kLong).device(q.device());

  const at::Tensor queries = at::constant_pad_nd(q, {0, 0, 0, 0, 0, padded - length})
                                 .view({tiles, tile, kv_heads, group, dim});  // [t, b, h, g, d]
  // Keys and values from position -(W - 1): tile t's window is rows [t x tile, t x tile + reach).
  const at::Tensor keys = at::constant_pad_nd(k, {0, 0, 0, 0, window - 1, padded - length}).unfold(0, reach, tile);
  const at::Tensor values = at::constant_pad_nd(v, {0, 0, 0, 0, window - 1, padded - length}).unfold(0, reach, tile);
  // [t, h, d, r] each
  const at::Tensor query_pos = (at::arange(tiles, index).unsqueeze(1) * tile + at::arange(tile, index)).view(
      {tiles, 1, 1, tile, 1});                                                    // [t, 1, 1, b, 1]
  const at::Tensor key_pos = (at::arange(tiles, index).unsqueeze(1) * tile - (window - 1) + at::arange(reach, index))
                                 .view({tiles, 1, 1, 1, reach});                  // [t, 1, 1, 1, r]
  // Rows past the sequence's end keep every key: finite values that are cut off, so their
  // (zero) gradients reach nothing as NaN.
  const at::Tensor padding_row = query_pos.ge(length);
  const at::Tensor keep_window = key_pos.ge(sink_count)
                                     .logical_and(key_pos.le(query_pos))
                                     .logical_and(query_pos.sub(key_pos).lt(window))
                                     .logical_or(padding_row);
  at::Tensor scores = at::einsum("tbhgd,thdr->thgbr", {queries, keys}).mul(scale).masked_fill(
      keep_window.logical_not(), -INFINITY);                                      // [t, h, g, b, r]
  at::Tensor sink_keys, sink_values;
  if (sink_count > 0) {
    sink_keys = k.narrow(0, 0, sink_count);    // [s, h, d]
    sink_values = v.narrow(0, 0, sink_count);
    const at::Tensor sink_pos = at::arange(sink_count, index).view({1, 1, 1, 1, sink_count});
    const at::Tensor sink_scores = at::einsum("tbhgd,shd->thgbs", {queries, sink_keys})
                                       .mul(scale)
                                       .masked_fill(sink_pos.gt(query_pos), -INFINITY);  // [t, h, g, b, s]
    scores = at::cat({sink_scores, scores}, -1);
  }
  const at::Tensor probs = at::softmax(scores, -1);
  at::Tensor out = at::einsum("thgbr,thdr->tbhgd", {probs.narrow(-1, sink_count, reach), values});
  if (sink_count > 0) out = out + at::einsum("thgbs,shd->tbhgd", {probs.narrow(-1, 0, sink_count), sink_values});
  return out.reshape({padded, kv_heads * group, dim}).narrow(0, 0, length);
}

}  // namespace

at::Tensor sliding_window_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const PackedSequences& sequences, const std::vector<int64_t>& windows,
                                    int64_t sinks, double scale) {
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3 && k.sizes() == v.sizes() && q.size(0) == k.size(0) &&
                  q.size(2) == k.size(2) && k.size(1) > 0 && q.size(1) % k.size(1) == 0,
              "sliding-window attention: q [T, Hq, D], k, v [T, Hkv, D] with Hq % Hkv == 0 expected, got q ", q.sizes(),
              ", k ", k.sizes(), ", v ", v.sizes());
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type() && k.device() == q.device() &&
                  v.device() == q.device(),
              "sliding-window attention: q, k, v must share one dtype and device");
  TORCH_CHECK(std::isfinite(scale) && scale > 0, "sliding-window attention: scale must be positive, got ", scale);
  TORCH_CHECK(sinks >= 0, "sliding-window attention: sinks must be >= 0, got ", sinks);
  TORCH_CHECK(static_cast<int64_t>(windows.size()) == sequences.num_sequences(),
              "sliding-window attention: ", windows.size(), " windows for ", sequences.num_sequences(), " sequences");
  sequences.check(q.size(0));
  std::vector<at::Tensor> outputs;
  for (int64_t s = 0; s < sequences.num_sequences(); ++s) {
    const int64_t begin = sequences.offsets[s], length = sequences.length(s);
    TORCH_CHECK(windows[s] >= 1, "sliding-window attention: window must be >= 1, got ", windows[s]);
    if (length == 0) continue;
    outputs.push_back(attend_sequence(q.narrow(0, begin, length), k.narrow(0, begin, length),
                                      v.narrow(0, begin, length), windows[s], sinks, scale));
  }
  if (outputs.empty()) return q.clone();  // T == 0: still part of q's graph
  return outputs.size() == 1 ? outputs.front().contiguous() : at::cat(outputs, 0);
}

}  // namespace sb
