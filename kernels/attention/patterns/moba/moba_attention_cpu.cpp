#include "kernels/attention/patterns/moba/moba_attention_cpu.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/attention/core/single_threaded_blas.h"

namespace sb {
namespace {

// Key/value gradients of the selected blocks are staged per row and then reduced per
// key block; a backward pass stages at most this many bytes at a time, in one buffer it
// reuses (fresh pages cost a fault each: a buffer per call was ~5% of the backward).
constexpr int64_t kBackwardStagingBytes = int64_t{32} << 20;

// Everything a row (query head h, query block b) needs, read from the routing.
struct MobaCpuProblem {
  const int64_t* table = nullptr;    // [NB, kBlockFields]
  const int32_t* selected = nullptr;  // [Hq, NB, capacity]
  const int32_t* count = nullptr;     // [Hq, NB]
  int64_t blocks = 0, capacity = 0, q_heads = 0, kv_heads = 0, dim = 0;
  int64_t longest_block = 1;
  bool causal = true;
  double scale = 1.0;

  MobaCpuProblem(const at::Tensor& q, const at::Tensor& k, const at::Tensor& table_t,
                 const at::Tensor& selected_t, const at::Tensor& count_t, bool causal_, double s)
      : table(table_t.const_data_ptr<int64_t>()),
        selected(selected_t.const_data_ptr<int32_t>()),
        count(count_t.const_data_ptr<int32_t>()),
        blocks(table_t.size(0)),
        capacity(selected_t.size(2)),
        q_heads(q.size(1)),
        kv_heads(k.size(1)),
        dim(q.size(2)),
        causal(causal_),
        scale(s) {
    for (int64_t b = 0; b < blocks; ++b) longest_block = std::max(longest_block, field(b, kBlockKeyLen));
  }

  int64_t rows() const { return q_heads * blocks; }
  // Multiply-adds of one row's forward, roughly (for the parallel grain).
  int64_t row_work() const { return longest_block * longest_block * capacity * dim; }
  int64_t head(int64_t row) const { return row / blocks; }
  int64_t query_block(int64_t row) const { return row % blocks; }
  int64_t kv_head(int64_t row) const { return head(row) / (q_heads / kv_heads); }
  int64_t field(int64_t b, int64_t f) const { return table[b * kBlockFields + f]; }
  const int32_t* row_blocks(int64_t row) const { return selected + row * capacity; }
  int64_t row_count(int64_t row) const { return count[row]; }
  int64_t row_keys(int64_t row) const {
    int64_t m = 0;
    for (int64_t i = 0; i < row_count(row); ++i) m += field(row_blocks(row)[i], kBlockKeyLen);
    return m;
  }
};

// The row's queries in x: a strided view [lq, D] of x [Tq, Hq, D] (q, out, dO, dQ), or
// [lq] of x [Tq, Hq] (lse, delta).
at::Tensor row_slice(const at::Tensor& x, const MobaCpuProblem& p, int64_t row) {
  const int64_t b = p.query_block(row);
  return x.select(1, p.head(row)).narrow(0, p.field(b, kBlockQueryStart), p.field(b, kBlockQueryLen));
}

// Buffers one thread reuses for every row it runs, sized for the largest row (a row's
// 64 x 512 float scores sit at malloc's mmap threshold: allocating them per row cost
// about 10% of the time in page faults).
struct RowScratch {
  at::Tensor keys, values;                  // [max_m * D]
  at::Tensor scores, probs, grad_scores;    // [max_lq * max_m]

  RowScratch(const MobaCpuProblem& p, const at::TensorOptions& options, bool backward) {
    const int64_t max_m = p.capacity * p.longest_block;
    keys = at::empty({max_m * p.dim}, options);
    values = at::empty({max_m * p.dim}, options);
    scores = at::empty({p.longest_block * max_m}, options);
    probs = at::empty({p.longest_block * max_m}, options);
    if (backward) grad_scores = at::empty({p.longest_block * max_m}, options);
  }
  // The first rows * cols elements of buffer as a contiguous [rows, cols] matrix.
  static at::Tensor matrix(const at::Tensor& buffer, int64_t rows, int64_t cols) {
    return buffer.narrow(0, 0, rows * cols).view({rows, cols});
  }
};

// Copies the keys (or values) of the row's selected blocks together into buffer:
// returns [m, D].
template <typename scalar_t>
at::Tensor gather_row_keys(const at::Tensor& x, const MobaCpuProblem& p, int64_t row, int64_t m,
                           const at::Tensor& buffer) {
  at::Tensor gathered = RowScratch::matrix(buffer, m, p.dim);
  scalar_t* dst = gathered.mutable_data_ptr<scalar_t>();
  const scalar_t* src = x.const_data_ptr<scalar_t>();
  const int64_t g = p.kv_head(row);
  for (int64_t i = 0; i < p.row_count(row); ++i) {
    const int64_t j = p.row_blocks(row)[i];
    for (int64_t t = p.field(j, kBlockKeyStart); t < p.field(j, kBlockKeyStart) + p.field(j, kBlockKeyLen); ++t) {
      std::memcpy(dst, src + (t * p.kv_heads + g) * p.dim, sizeof(scalar_t) * p.dim);
      dst += p.dim;
    }
  }
  return gathered;
}

// The row's probabilities [lq, m] (in scratch.probs): softmax of the scaled scores
// (in scratch.scores) with the causal mask inside the diagonal block: the query at
// in-block position pos sees the diagonal block's keys 0 .. pos.
template <typename scalar_t>
at::Tensor row_probabilities(const at::Tensor& queries, const at::Tensor& keys,
                             const MobaCpuProblem& p, int64_t row, RowScratch& scratch) {
  const int64_t lq = queries.size(0), m = keys.size(0);
  at::Tensor scores = RowScratch::matrix(scratch.scores, lq, m);
  at::addmm_out(scores, scores, queries, keys.t(), /*beta=*/0, /*alpha=*/p.scale);
  // The diagonal block's columns among the row's keys; a row that does not list its own
  // block (any routing but MoBA's gate may) has nothing to mask.
  const int64_t b = p.query_block(row);
  int64_t column = 0, i = 0;
  for (; i < p.row_count(row) && p.row_blocks(row)[i] != b; ++i) {
    column += p.field(p.row_blocks(row)[i], kBlockKeyLen);
  }
  if (p.causal && i < p.row_count(row)) {
    const int64_t diagonal_len = p.field(b, kBlockKeyLen);
    scalar_t* s = scores.mutable_data_ptr<scalar_t>();
    for (int64_t r = 0; r < lq; ++r) {
      const int64_t pos = p.field(b, kBlockQueryPos0) + r;
      for (int64_t c = pos + 1; c < diagonal_len; ++c) {
        s[r * m + column + c] = -std::numeric_limits<scalar_t>::infinity();
      }
    }
  }
  at::Tensor probs = RowScratch::matrix(scratch.probs, lq, m);
  at::_softmax_out(probs, scores, 1, /*half_to_float=*/false);
  return probs;
}

template <typename scalar_t>
void moba_cpu_forward_typed(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const MobaCpuProblem& p, at::Tensor& out, at::Tensor& lse) {
  at::parallel_for(0, p.rows(), moba_parallel_grain(p.row_work()), [&](int64_t r0, int64_t r1) {
    const c10::NoGradGuard no_grad;  // grad mode is per thread; workers start with it on
    const SingleThreadedBlas single_threaded_blas;
    RowScratch scratch(p, q.options(), /*backward=*/false);
    for (int64_t row = r0; row < r1; ++row) {
      if (p.row_count(row) == 0) continue;
      const int64_t m = p.row_keys(row);
      const at::Tensor keys = gather_row_keys<scalar_t>(k, p, row, m, scratch.keys);
      const at::Tensor values = gather_row_keys<scalar_t>(v, p, row, m, scratch.values);
      const at::Tensor probs = row_probabilities<scalar_t>(row_slice(q, p, row), keys, p, row, scratch);
      at::Tensor out_rows = row_slice(out, p, row);
      at::mm_out(out_rows, probs, values);
      // lse = max - log(p_max): the largest probability is >= 1 / m, so its log is exact
      // to rounding (softmax and amax avoid MKL's threaded vector exp).
      const at::Tensor scores = RowScratch::matrix(scratch.scores, probs.size(0), m);
      row_slice(lse, p, row).copy_(scores.amax(1) - probs.amax(1).log());
    }
  });
}

// Where one selected block's staged key/value gradient rows go.
struct StagedBlock {
  int64_t staging_row;  // first row in the staging buffers
  int64_t length;       // rows (the block's keys)
};

template <typename scalar_t>
void moba_cpu_backward_typed(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                             const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                             const MobaCpuProblem& p, at::Tensor& dq, at::Tensor& dk,
                             at::Tensor& dv) {
  const at::Tensor delta = (grad_out * out).sum(-1);  // [Tq, Hq]: rowsum(dO * O)
  std::vector<int64_t> active;                        // rows with queries, in order
  for (int64_t row = 0; row < p.rows(); ++row) {
    if (p.row_count(row) > 0) active.push_back(row);
  }
  const int64_t row_bytes_per_key = 2 * p.dim * static_cast<int64_t>(sizeof(scalar_t));
  at::Tensor staging_dk = at::empty({0, p.dim}, k.options()), staging_dv = staging_dk;
  size_t next = 0;
  while (next < active.size()) {
    // A chunk of rows whose staged gradients fit the budget (at least one row).
    std::vector<int64_t> rows, staging_offset;
    int64_t staged = 0;
    while (next < active.size()) {
      const int64_t m = p.row_keys(active[next]);
      if (!rows.empty() && (staged + m) * row_bytes_per_key > kBackwardStagingBytes) break;
      rows.push_back(active[next++]);
      staging_offset.push_back(staged);
      staged += m;
    }
    if (staging_dk.size(0) < staged) {
      staging_dk = at::empty({staged, p.dim}, k.options());  // [sum m, D]
      staging_dv = at::empty({staged, p.dim}, v.options());
    }
    const at::Tensor staged_dk = staging_dk.narrow(0, 0, staged);
    const at::Tensor staged_dv = staging_dv.narrow(0, 0, staged);

    const int64_t row_grain = moba_parallel_grain(3 * p.row_work());
    at::parallel_for(0, static_cast<int64_t>(rows.size()), row_grain, [&](int64_t i0, int64_t i1) {
      const c10::NoGradGuard no_grad;
      const SingleThreadedBlas single_threaded_blas;
      RowScratch scratch(p, q.options(), /*backward=*/true);
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t row = rows[i];
        const int64_t m = p.row_keys(row);
        const at::Tensor keys = gather_row_keys<scalar_t>(k, p, row, m, scratch.keys);
        const at::Tensor values = gather_row_keys<scalar_t>(v, p, row, m, scratch.values);
        const at::Tensor queries = row_slice(q, p, row);           // [lq, D]
        const at::Tensor grad_rows = row_slice(grad_out, p, row);  // [lq, D]
        // The forward's probabilities again (softmax of the same scores).
        const at::Tensor probs = row_probabilities<scalar_t>(queries, keys, p, row, scratch);
        at::Tensor grad_scores = RowScratch::matrix(scratch.grad_scores, queries.size(0), m);
        at::mm_out(grad_scores, grad_rows, values.t());  // dP [lq, m]
        grad_scores.sub_(row_slice(delta, p, row).unsqueeze(1)).mul_(probs);  // dS
        at::Tensor dq_rows = row_slice(dq, p, row);
        at::addmm_out(dq_rows, dq_rows, grad_scores, keys, /*beta=*/0, /*alpha=*/p.scale);
        at::Tensor dk_rows = staged_dk.narrow(0, staging_offset[i], m);
        at::addmm_out(dk_rows, dk_rows, grad_scores.t(), queries, /*beta=*/0, /*alpha=*/p.scale);
        at::Tensor dv_rows = staged_dv.narrow(0, staging_offset[i], m);
        at::mm_out(dv_rows, probs.t(), grad_rows);
      }
    });

    // Reduce per (key/value head, key block), contributions in row order.
    const int64_t keys_total = p.kv_heads * p.blocks;
    std::vector<int64_t> first(keys_total + 1, 0);
    for (int64_t row : rows) {
      for (int64_t s = 0; s < p.row_count(row); ++s) {
        first[p.kv_head(row) * p.blocks + p.row_blocks(row)[s] + 1] += 1;
      }
    }
    for (int64_t key = 0; key < keys_total; ++key) first[key + 1] += first[key];
    std::vector<StagedBlock> contributions(first.back());
    std::vector<int64_t> fill(first.begin(), first.end() - 1);
    for (size_t i = 0; i < rows.size(); ++i) {
      int64_t staging_row = staging_offset[i];
      for (int64_t s = 0; s < p.row_count(rows[i]); ++s) {
        const int64_t j = p.row_blocks(rows[i])[s];
        contributions[fill[p.kv_head(rows[i]) * p.blocks + j]++] = {staging_row,
                                                                    p.field(j, kBlockKeyLen)};
        staging_row += p.field(j, kBlockKeyLen);
      }
    }
    const scalar_t* sdk = staged_dk.const_data_ptr<scalar_t>();
    const scalar_t* sdv = staged_dv.const_data_ptr<scalar_t>();
    scalar_t* pdk = dk.mutable_data_ptr<scalar_t>();
    scalar_t* pdv = dv.mutable_data_ptr<scalar_t>();
    const int64_t key_grain = moba_parallel_grain(p.row_work() / std::max<int64_t>(1, p.dim));
    at::parallel_for(0, keys_total, key_grain, [&](int64_t key0, int64_t key1) {
      for (int64_t key = key0; key < key1; ++key) {
        const int64_t g = key / p.blocks, j = key % p.blocks;
        for (int64_t c = first[key]; c < first[key + 1]; ++c) {
          for (int64_t t = 0; t < contributions[c].length; ++t) {
            const int64_t dst = ((p.field(j, kBlockKeyStart) + t) * p.kv_heads + g) * p.dim;
            const int64_t src = (contributions[c].staging_row + t) * p.dim;
            for (int64_t d = 0; d < p.dim; ++d) {
              pdk[dst + d] += sdk[src + d];
              pdv[dst + d] += sdv[src + d];
            }
          }
        }
      }
    });
  }
}

class MobaCpuFunction : public torch::autograd::Function<MobaCpuFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const at::Tensor& q, const at::Tensor& k,
                                                const at::Tensor& v, const at::Tensor& table,
                                                const at::Tensor& selected,
                                                const at::Tensor& count, bool causal,
                                                double scale) {
    const MobaCpuProblem p(q, k, table, selected, count, causal, scale);
    at::Tensor out = at::empty_like(q);  // [Tq, Hq, D]: every query belongs to one row
    at::Tensor lse = at::empty({q.size(0), q.size(1)}, q.options());  // [Tq, Hq]
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "moba_cpu_forward",
                               [&] { moba_cpu_forward_typed<scalar_t>(q, k, v, p, out, lse); });
    ctx->save_for_backward({q, k, v, out, lse, table, selected, count});
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale;
    ctx->mark_non_differentiable({lse});
    return {out, lse};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    const MobaCpuProblem p(q, k, saved[5], saved[6], saved[7], ctx->saved_data["causal"].toBool(),
                           ctx->saved_data["scale"].toDouble());
    at::Tensor dq = at::zeros_like(q), dk = at::zeros_like(k), dv = at::zeros_like(v);
    if (grads[0].defined()) {
      const at::Tensor grad_out = grads[0].contiguous();
      AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "moba_cpu_backward", [&] {
        moba_cpu_backward_typed<scalar_t>(grad_out, q, k, v, out, lse, p, dq, dk, dv);
      });
    }
    return {dq, dk, dv, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

void moba_check_cpu_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const char* kernel) {
  TORCH_CHECK(q.scalar_type() == at::kFloat || q.scalar_type() == at::kDouble, kernel,
              ": float32 or float64 expected, got ", q.scalar_type());
  TORCH_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous(), kernel, ": q, k, v must be contiguous");
}

std::pair<at::Tensor, at::Tensor> moba_attention_cpu(const at::Tensor& q, const at::Tensor& k,
                                                     const at::Tensor& v, const BlockLayout& layout,
                                                     const MobaRouting& routing, double scale) {
  moba_check_cpu_inputs(q, k, v, "moba_attention_cpu");
  auto outputs = MobaCpuFunction::apply(q, k, v, block_layout_table(layout), routing.selected,
                                        routing.selected_count, layout.causal, scale);
  return {outputs[0], outputs[1]};
}

}  // namespace sb
