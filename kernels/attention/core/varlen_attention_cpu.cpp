#include "kernels/attention/core/varlen_attention_cpu.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/attention/core/single_threaded_blas.h"

namespace sb {
namespace {

// Queries per tile: a tile's [tile, lk] scores stay small whatever the segment's length.
constexpr int64_t kQueryTile = 128;

std::vector<int64_t> host_offsets(const at::Tensor& cu) {
  const at::Tensor c = cu.to(at::kLong).cpu().contiguous();
  return std::vector<int64_t>(c.const_data_ptr<int64_t>(), c.const_data_ptr<int64_t>() + c.numel());
}

struct Segments {
  std::vector<int64_t> q, k;  // offsets, n + 1 each
  int64_t count() const { return static_cast<int64_t>(q.size()) - 1; }
  int64_t queries(int64_t i) const { return q[i + 1] - q[i]; }
  int64_t keys(int64_t i) const { return k[i + 1] - k[i]; }
};

Segments read_segments(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cu_q, const at::Tensor& cu_k) {
  Segments s{host_offsets(cu_q), host_offsets(cu_k)};
  TORCH_CHECK(s.q.size() == s.k.size() && !s.q.empty() && s.q.front() == 0 && s.k.front() == 0 &&
                  s.q.back() == q.size(0) && s.k.back() == k.size(0),
              "cpu varlen attention: cu_q and cu_k must have one entry more than segments, start at 0 "
              "and end at the tokens of q and k");
  return s;
}

template <typename scalar_t>
void mask_hidden_keys(at::Tensor& scores, int64_t r0, int64_t lq) {
  const int64_t lk = scores.size(1);
  scalar_t* row = scores.mutable_data_ptr<scalar_t>();
  for (int64_t r = 0; r < scores.size(0); ++r, row += lk) {
    const int64_t first_hidden = std::max<int64_t>(r0 + r + lk - lq + 1, 0);
    std::fill(row + std::min(first_hidden, lk), row + lk, -std::numeric_limits<scalar_t>::infinity());
  }
}

// The scaled scores of queries [rows, D] (rows r0 .. of a segment of lq queries and lk
// keys) against the segment's keys [lk, D], causal: query r sees keys 0 .. r + lk - lq.
// Written into scores, contiguous [rows, lk].
void masked_scores(const at::Tensor& queries, const at::Tensor& keys, int64_t r0, int64_t lq, bool causal,
                   double scale, at::Tensor& scores) {
  at::addmm_out(scores, scores, queries, keys.t(), /*beta=*/0, /*alpha=*/scale);
  if (!causal) return;
  if (scores.scalar_type() == at::kFloat) {
    mask_hidden_keys<float>(scores, r0, lq);
  } else {
    mask_hidden_keys<double>(scores, r0, lq);
  }
}

// Rows of the tile whose every key is masked (causal, more queries than keys).
int64_t hidden_rows(int64_t r0, int64_t rows, int64_t lq, int64_t lk, bool causal) {
  if (!causal) return 0;
  // Query r sees keys 0 .. r + lk - lq: none while r < lq - lk.
  return std::clamp<int64_t>(lq - lk - r0, 0, rows);
}

class CpuVarlenAttention final : public VarlenAttentionOps {
 public:
  VarlenAttentionForward forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& cu_q, const at::Tensor& cu_k, int64_t /*max_q*/,
                                 int64_t /*max_k*/, bool causal, double scale) const override {
    check_inputs(q, k, v);
    const Segments seg = read_segments(q, k, cu_q, cu_k);
    const int64_t heads = q.size(1), group = heads / k.size(1);
    at::Tensor out = at::zeros_like(q);
    at::Tensor lse = at::full({heads, q.size(0)}, -std::numeric_limits<double>::infinity(), q.options());
    at::parallel_for(0, seg.count() * heads, 1, [&](int64_t i0, int64_t i1) {
      const c10::NoGradGuard no_grad;  // grad mode is per thread; workers start with it on
      const SingleThreadedBlas single_threaded_blas;
      for (int64_t item = i0; item < i1; ++item) {
        const int64_t s = item / heads, h = item % heads, g = h / group;
        const int64_t lq = seg.queries(s), lk = seg.keys(s);
        if (lq == 0 || lk == 0) continue;
        const at::Tensor keys = k.narrow(0, seg.k[s], lk).select(1, g);    // [lk, D]
        const at::Tensor values = v.narrow(0, seg.k[s], lk).select(1, g);  // [lk, D]
        for (int64_t r0 = 0; r0 < lq; r0 += kQueryTile) {
          const int64_t rows = std::min(kQueryTile, lq - r0);
          const int64_t skip = hidden_rows(r0, rows, lq, lk, causal);
          if (skip == rows) continue;
          const int64_t first = seg.q[s] + r0 + skip;
          at::Tensor scores = at::empty({rows - skip, lk}, q.options());
          masked_scores(q.narrow(0, first, rows - skip).select(1, h), keys, r0 + skip, lq, causal, scale, scores);
          const at::Tensor probs = scores.softmax(1);
          at::Tensor out_rows = out.narrow(0, first, rows - skip).select(1, h);
          at::mm_out(out_rows, probs, values);
          // lse = max - log(p_max): the largest probability is >= 1 / lk, so its log is exact
          // to rounding.
          lse[h].narrow(0, first, rows - skip).copy_(scores.amax(1) - probs.amax(1).log());
        }
      }
    });
    return {out, lse, at::Tensor(), at::Tensor()};
  }

  std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(
      const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
      const at::Tensor& out, const at::Tensor& lse, const at::Tensor& cu_q, const at::Tensor& cu_k,
      int64_t /*max_q*/, int64_t /*max_k*/, bool causal, double scale,
      const VarlenAttentionForward& /*forward_state*/) const override {
    check_inputs(q, k, v);
    const Segments seg = read_segments(q, k, cu_q, cu_k);
    const int64_t heads = q.size(1), kv_heads = k.size(1), group = heads / kv_heads;
    const at::Tensor delta = (grad_out * out).sum(-1).t().contiguous();  // [H, Nq]: rowsum(dO * O)
    at::Tensor dq = at::zeros_like(q), dk = at::zeros_like(k), dv = at::zeros_like(v);
    at::parallel_for(0, seg.count() * kv_heads, 1, [&](int64_t i0, int64_t i1) {
      const c10::NoGradGuard no_grad;
      const SingleThreadedBlas single_threaded_blas;
      for (int64_t item = i0; item < i1; ++item) {
        const int64_t s = item / kv_heads, g = item % kv_heads;
        const int64_t lq = seg.queries(s), lk = seg.keys(s);
        if (lq == 0 || lk == 0) continue;
        const at::Tensor keys = k.narrow(0, seg.k[s], lk).select(1, g);    // [lk, D]
        const at::Tensor values = v.narrow(0, seg.k[s], lk).select(1, g);  // [lk, D]
        at::Tensor dk_rows = dk.narrow(0, seg.k[s], lk).select(1, g);
        at::Tensor dv_rows = dv.narrow(0, seg.k[s], lk).select(1, g);
        for (int64_t h = g * group; h < (g + 1) * group; ++h) {
          for (int64_t r0 = 0; r0 < lq; r0 += kQueryTile) {
            const int64_t rows = std::min(kQueryTile, lq - r0);
            const int64_t skip = hidden_rows(r0, rows, lq, lk, causal);
            if (skip == rows) continue;
            const int64_t first = seg.q[s] + r0 + skip, n = rows - skip;
            const at::Tensor queries = q.narrow(0, first, n).select(1, h);  // [n, D]
            const at::Tensor grads = grad_out.narrow(0, first, n).select(1, h);
            at::Tensor probs = at::empty({n, lk}, q.options());
            masked_scores(queries, keys, r0 + skip, lq, causal, scale, probs);
            probs.sub_(lse[h].narrow(0, first, n).unsqueeze(1)).exp_();  // P (masked keys: 0)
            at::addmm_out(dv_rows, dv_rows, probs.t(), grads);          // dV += P^T dO
            at::Tensor grad_scores = at::mm(grads, values.t());          // dP [n, lk]
            grad_scores.sub_(delta[h].narrow(0, first, n).unsqueeze(1)).mul_(probs);  // dS
            at::Tensor dq_rows = dq.narrow(0, first, n).select(1, h);
            at::addmm_out(dq_rows, dq_rows, grad_scores, keys, /*beta=*/0, /*alpha=*/scale);
            at::addmm_out(dk_rows, dk_rows, grad_scores.t(), queries, /*beta=*/1, /*alpha=*/scale);
          }
        }
      }
    });
    return {dq, dk, dv};
  }

 private:
  static void check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    TORCH_CHECK(q.device().is_cpu() && (q.scalar_type() == at::kFloat || q.scalar_type() == at::kDouble),
                "cpu varlen attention: float32 or float64 CPU tensors expected, got ", q.scalar_type(), " on ",
                q.device());
    TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type() && q.dim() == 3 &&
                    k.dim() == 3 && k.sizes() == v.sizes() && q.size(2) == k.size(2) && q.size(1) % k.size(1) == 0,
                "cpu varlen attention: q [Nq, H, D], k and v [Nk, Hk, D] of q's dtype, H a multiple of Hk");
  }
};

}  // namespace

const VarlenAttentionOps& cpu_varlen_attention() {
  static const CpuVarlenAttention ops;
  return ops;
}

}  // namespace sb
