#include "kernels/attention/patterns/sliding_window/sliding_window_reference.h"

#include <ATen/ATen.h>

#include <cmath>

#include "kernels/attention/patterns/sliding_window/sliding_window_rule.h"

namespace sb {
namespace {

// keep[r, j] for query rows first_row .. length - 1 and keys 0 .. length - 1.
at::Tensor keep_mask(int64_t length, int64_t first_row, int64_t window, int64_t sinks) {
  const at::Tensor query = at::arange(first_row, length, at::kLong).unsqueeze(1);  // [r, 1]
  const at::Tensor key = at::arange(0, length, at::kLong).unsqueeze(0);           // [1, L]
  return key.le(query).logical_and(query.sub(key).lt(window).logical_or(key.lt(sinks)));
}

// Rows [first_row, L) of one sequence: out [r, Hq, D] and lse [r, Hq], float64.
std::pair<at::Tensor, at::Tensor> attend_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                              int64_t window, int64_t sinks, double scale, int64_t first_row) {
  const int64_t length = q.size(0), rows = length - first_row, group = q.size(1) / k.size(1);
  const at::Tensor qr = q.narrow(0, first_row, rows).to(at::kDouble).permute({1, 0, 2});  // [Hq, r, D]
  const at::Tensor kk = k.to(at::kDouble).repeat_interleave(group, 1).permute({1, 2, 0});  // [Hq, D, L]
  const at::Tensor vv = v.to(at::kDouble).repeat_interleave(group, 1).permute({1, 0, 2});  // [Hq, L, D]
  const at::Tensor scores =
      at::matmul(qr, kk).mul(scale).masked_fill(keep_mask(length, first_row, window, sinks).logical_not(), -INFINITY);
  const at::Tensor lse = at::logsumexp(scores, -1);                                         // [Hq, r]
  const at::Tensor out = at::matmul(at::softmax(scores, -1), vv);                           // [Hq, r, D]
  return {out.permute({1, 0, 2}), lse.transpose(0, 1)};
}

}  // namespace

double sliding_window_pairs(int64_t length, int64_t window, int64_t sinks) {
  const auto l = static_cast<double>(length);
  const auto w = static_cast<double>(std::min(window, length));
  double pairs = w * (w + 1) / 2 + (l - w) * w;  // sum of min(p + 1, W)
  const double beyond = l - w;                    // queries with p - W + 1 >= 1 sinks outside the window
  const auto s = static_cast<double>(sinks);
  pairs += beyond <= s ? beyond * (beyond + 1) / 2 : s * (s + 1) / 2 + (beyond - s) * s;
  return pairs;
}

SlidingWindowReferenceResult sliding_window_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                      const PackedSequences& sequences,
                                                      const std::vector<int64_t>& windows, int64_t sinks,
                                                      double scale) {
  TORCH_CHECK(static_cast<int64_t>(windows.size()) == sequences.num_sequences(),
              "sliding-window reference: one window per sequence expected");
  std::vector<at::Tensor> outs, lses;
  for (int64_t s = 0; s < sequences.num_sequences(); ++s) {
    const int64_t begin = sequences.offsets[s], length = sequences.length(s);
    if (length == 0) continue;
    auto [out, lse] = attend_rows(q.narrow(0, begin, length), k.narrow(0, begin, length), v.narrow(0, begin, length),
                                  windows[s], sinks, scale, 0);
    outs.push_back(out);
    lses.push_back(lse);
  }
  if (outs.empty()) return {q.to(at::kDouble).clone(), at::zeros({0, q.size(1)}, q.options().dtype(at::kDouble))};
  return {at::cat(outs, 0), at::cat(lses, 0)};
}

at::Tensor sliding_window_reference_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                         int64_t window, int64_t sinks, double scale, int64_t first_row) {
  return attend_rows(q.cpu(), k.cpu(), v.cpu(), window, sinks, scale, first_row).first.contiguous();
}

}  // namespace sb
