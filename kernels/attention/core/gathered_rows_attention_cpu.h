#pragma once
// The inner step of the CPU kernels that visit a run of keys with the queries that read
// it gathered into one matrix (MoBA's token gate, the ring's per-query key blocks): the
// queries of one head are rows of q [T, H, D] listed by index; their running outputs live
// in an [T, H, D] accumulator with a running maximum and sum per row (online softmax), and
// the backward recomputes the probabilities from the final log-sum-exp. Called on one
// thread per (head, ...) unit: nothing here synchronises.

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace sb {

// Rows `rows` of head h of x [T, H, D] (contiguous) gathered into [rows, D].
template <typename scalar_t>
at::Tensor gather_head_rows(const at::Tensor& x, int64_t h, const std::vector<int64_t>& rows) {
  const int64_t heads = x.size(1), dim = x.size(2);
  at::Tensor out = at::empty({static_cast<int64_t>(rows.size()), dim}, x.options());
  const scalar_t* src = x.const_data_ptr<scalar_t>();
  scalar_t* dst = out.mutable_data_ptr<scalar_t>();
  for (size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(dst + i * dim, src + (rows[i] * heads + h) * dim, sizeof(scalar_t) * dim);
  }
  return out;
}

// The running softmax of one head's rows: out [T, H, D] accumulates (unnormalised, scaled
// to the running maximum); running_max and running_sum are indexed by row - offset.
template <typename scalar_t>
struct OnlineSoftmaxRows {
  scalar_t* out;
  int64_t heads, dim, head;
  scalar_t* running_max;
  scalar_t* running_sum;
  int64_t offset = 0;

  // scores [rows, len] (scaled; -inf masks a key) are overwritten by their exponentials;
  // values [len, D]. Adds the keys to every listed row. A row whose keys are all masked
  // so far keeps a -inf maximum and adds nothing.
  void add(at::Tensor& scores, const at::Tensor& values, const std::vector<int64_t>& rows) {
    const int64_t len = scores.size(1);
    scalar_t* s = scores.mutable_data_ptr<scalar_t>();
    std::vector<scalar_t> correction(rows.size()), sums(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      scalar_t* row = s + i * len;
      const int64_t r = rows[i] - offset;
      const scalar_t new_max = std::max(running_max[r], *std::max_element(row, row + len));
      if (new_max == -std::numeric_limits<scalar_t>::infinity()) {  // nothing visible yet
        std::fill(row, row + len, scalar_t(0));
        correction[i] = 1;
        sums[i] = 0;
        continue;
      }
      scalar_t sum = 0;
      for (int64_t c = 0; c < len; ++c) sum += (row[c] = std::exp(row[c] - new_max));
      correction[i] = std::exp(running_max[r] - new_max);
      sums[i] = sum;
      running_max[r] = new_max;
    }
    const at::Tensor weighted = at::mm(scores, values);  // [rows, D]
    const scalar_t* w = weighted.const_data_ptr<scalar_t>();
    for (size_t i = 0; i < rows.size(); ++i) {
      const int64_t r = rows[i] - offset;
      scalar_t* a = out + (rows[i] * heads + head) * dim;
      for (int64_t d = 0; d < dim; ++d) a[d] = a[d] * correction[i] + w[i * dim + d];
      running_sum[r] = running_sum[r] * correction[i] + sums[i];
    }
  }

  // Normalises `row` and writes its log-sum-exp into lse [T, H]; a row that saw no key
  // keeps out 0 and gets -inf.
  void finish(int64_t row, scalar_t* lse) const {
    const int64_t r = row - offset;
    scalar_t* a = out + (row * heads + head) * dim;
    if (running_sum[r] > 0) {
      for (int64_t d = 0; d < dim; ++d) a[d] /= running_sum[r];
      lse[row * heads + head] = running_max[r] + std::log(running_sum[r]);
    } else {
      lse[row * heads + head] = -std::numeric_limits<scalar_t>::infinity();
    }
  }
};

// The gradients of one (head, run of keys) visit given the final lse and delta =
// rowsum(dO * O), both [T, H]: scores [rows, len] (scaled, -inf masked) are overwritten;
// queries, grads [rows, D] the gathered q and dO rows; keys, values [len, D]; dk_rows,
// dv_rows [len, D] views of the keys' gradients (added to); dq [T, H, D] (added to).
template <typename scalar_t>
void gathered_rows_backward(at::Tensor& scores, const at::Tensor& queries, const at::Tensor& grads,
                            const at::Tensor& keys, const at::Tensor& values, const std::vector<int64_t>& rows,
                            int64_t head, int64_t heads, const scalar_t* lse, const scalar_t* delta, double scale,
                            scalar_t* dq, at::Tensor& dk_rows, at::Tensor& dv_rows) {
  const int64_t len = scores.size(1), dim = queries.size(1);
  scalar_t* p = scores.mutable_data_ptr<scalar_t>();  // P = exp(S - lse)
  for (size_t i = 0; i < rows.size(); ++i) {
    const scalar_t row_lse = lse[rows[i] * heads + head];
    for (int64_t c = 0; c < len; ++c) p[i * len + c] = std::exp(p[i * len + c] - row_lse);
  }
  at::addmm_out(dv_rows, dv_rows, scores.t(), grads);  // dV += P^T dO
  at::Tensor grad_scores = at::mm(grads, values.t());  // dP, then dS = P (dP - delta)
  scalar_t* gs = grad_scores.mutable_data_ptr<scalar_t>();
  for (size_t i = 0; i < rows.size(); ++i) {
    const scalar_t row_delta = delta[rows[i] * heads + head];
    for (int64_t c = 0; c < len; ++c) gs[i * len + c] = p[i * len + c] * (gs[i * len + c] - row_delta);
  }
  const at::Tensor dq_rows = at::mm(grad_scores, keys);  // [rows, D], times scale below
  const scalar_t* dqr = dq_rows.const_data_ptr<scalar_t>();
  const auto s = static_cast<scalar_t>(scale);
  for (size_t i = 0; i < rows.size(); ++i) {
    scalar_t* target = dq + (rows[i] * heads + head) * dim;
    for (int64_t d = 0; d < dim; ++d) target[d] += s * dqr[i * dim + d];
  }
  at::addmm_out(dk_rows, dk_rows, grad_scores.t(), queries, /*beta=*/1, /*alpha=*/scale);
}

}  // namespace sb
