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
  const bool grouped = q.size(1) != k.size(1);
  const auto index = at::TensorOptions().dtype(at::kLong).device(q.device());
  const auto heads_first = [](const at::Tensor& x) { return x.transpose(0, 1).unsqueeze(0); };  // [1, H, n, D]
  std::vector<at::Tensor> tiles;
  for (int64_t first = 0; first < length; first += kSlidingWindowTile) {
    const int64_t end = std::min(length, first + kSlidingWindowTile);
    // The keys the tile's windows reach, [window_first, end), and the sinks before them.
    const int64_t window_first = std::max<int64_t>(0, first - window + 1);
    const int64_t sinks_before = std::min(sinks, window_first);
    const at::Tensor query = at::arange(first, end, index).unsqueeze(1);        // [n, 1]
    const at::Tensor key = at::arange(window_first, end, index).unsqueeze(0);   // [1, m]
    // Keys of the span that are sinks stay kept for the tile's later queries too.
    at::Tensor keep = key.le(query).logical_and(query.sub(key).lt(window).logical_or(key.lt(sinks)));
    at::Tensor keys = k.narrow(0, window_first, end - window_first);
    at::Tensor values = v.narrow(0, window_first, end - window_first);
    if (sinks_before > 0) {
      keys = at::cat({k.narrow(0, 0, sinks_before), keys}, 0);
      values = at::cat({v.narrow(0, 0, sinks_before), values}, 0);
      keep = at::cat({at::ones({end - first, sinks_before}, keep.options()), keep}, 1);
    }
    const at::Tensor out = at::scaled_dot_product_attention(heads_first(q.narrow(0, first, end - first)),
                                                            heads_first(keys), heads_first(values), keep, 0.0,
                                                            false, scale, grouped);
    tiles.push_back(out.squeeze(0).transpose(0, 1));  // [n, Hq, D]
  }
  return tiles.size() == 1 ? tiles.front() : at::cat(tiles, 0);
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
