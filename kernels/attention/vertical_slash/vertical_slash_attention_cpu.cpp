#include "kernels/attention/vertical_slash/vertical_slash_attention_cpu.h"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/custom_class.h>

#include <cmath>
#include <limits>

namespace sb {
namespace {

// What the backward needs besides tensors; travels through autograd as a capsule.
struct VerticalSlashPlan : torch::CustomClassHolder {
  PackedSequences sequences;
  std::vector<std::vector<VerticalSlashHeadIndex>> index;
  double scale = 0;
  std::vector<int64_t> kept_pairs;  // per sequence, set by the forward
};

// A (sequence, key/value head) task's view of the packed tensors.
struct Shapes {
  int64_t q_heads, kv_heads, dim, group;
};

// Row i's kept keys (positions in the sequence): the verticals up to i, then the keys
// its slashes reach that are not verticals already.
void row_keys(const VerticalSlashHeadIndex& index, const std::vector<char>& is_vertical, int64_t i,
              std::vector<int64_t>& keys) {
  keys.clear();
  for (int64_t j : index.verticals) {
    if (j > i) break;
    keys.push_back(j);
  }
  for (int64_t d : index.slashes) {
    if (d > i) break;
    if (!is_vertical[static_cast<size_t>(i - d)]) keys.push_back(i - d);
  }
}

std::vector<char> vertical_flags(const VerticalSlashHeadIndex& index, int64_t length) {
  std::vector<char> flags(static_cast<size_t>(length), 0);
  for (int64_t j : index.verticals) {
    if (j < length) flags[static_cast<size_t>(j)] = 1;
  }
  return flags;
}

// In float64 whatever the inputs; vectorised (the file compiles with OpenMP's flags, which
// also make at::parallel_for parallel).
template <typename scalar_t>
double dot(const scalar_t* a, const scalar_t* b, int64_t n) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t d = 0; d < n; ++d) sum += static_cast<double>(a[d]) * static_cast<double>(b[d]);
  return sum;
}

// Runs body(sequence, offset, length, kv_head) for every (sequence, key/value head), in
// parallel over them.
template <class Body>
void for_each_task(const VerticalSlashPlan& plan, const Shapes& shapes, Body body) {
  const int64_t tasks = plan.sequences.num_sequences() * shapes.kv_heads;
  at::parallel_for(0, tasks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t s = task / shapes.kv_heads;
      body(s, plan.sequences.offsets[static_cast<size_t>(s)], plan.sequences.length(s), task % shapes.kv_heads);
    }
  });
}

template <typename scalar_t>
void forward_typed(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, VerticalSlashPlan& plan,
                   const Shapes& sh, at::Tensor& out, at::Tensor& lse) {
  const scalar_t* qp = q.const_data_ptr<scalar_t>();
  const scalar_t* kp = k.const_data_ptr<scalar_t>();
  const scalar_t* vp = v.const_data_ptr<scalar_t>();
  scalar_t* op = out.mutable_data_ptr<scalar_t>();
  scalar_t* lp = lse.mutable_data_ptr<scalar_t>();
  const int64_t D = sh.dim;
  std::vector<int64_t> kept(static_cast<size_t>(plan.sequences.num_sequences() * sh.kv_heads), 0);
  for_each_task(plan, sh, [&](int64_t s, int64_t offset, int64_t length, int64_t kv) {
    if (length == 0) return;
    std::vector<int64_t> keys;
    std::vector<double> p, acc(static_cast<size_t>(D));
    int64_t pairs = 0;
    for (int64_t h = kv * sh.group; h < (kv + 1) * sh.group; ++h) {
      const VerticalSlashHeadIndex& index = plan.index[static_cast<size_t>(s)][static_cast<size_t>(h)];
      const std::vector<char> is_vertical = vertical_flags(index, length);
      for (int64_t i = 0; i < length; ++i) {
        row_keys(index, is_vertical, i, keys);
        const scalar_t* qi = qp + ((offset + i) * sh.q_heads + h) * D;
        p.resize(keys.size());
        double top = -std::numeric_limits<double>::infinity();
        for (size_t a = 0; a < keys.size(); ++a) {
          p[a] = plan.scale * dot(qi, kp + ((offset + keys[a]) * sh.kv_heads + kv) * D, D);
          top = std::max(top, p[a]);
        }
        double z = 0;
        for (double& x : p) z += (x = std::exp(x - top));
        std::fill(acc.begin(), acc.end(), 0.0);
        for (size_t a = 0; a < keys.size(); ++a) {
          const scalar_t* vj = vp + ((offset + keys[a]) * sh.kv_heads + kv) * D;
          const double w = p[a] / z;
          for (int64_t d = 0; d < D; ++d) acc[static_cast<size_t>(d)] += w * static_cast<double>(vj[d]);
        }
        scalar_t* oi = op + ((offset + i) * sh.q_heads + h) * D;
        for (int64_t d = 0; d < D; ++d) oi[d] = static_cast<scalar_t>(acc[static_cast<size_t>(d)]);
        lp[(offset + i) * sh.q_heads + h] = static_cast<scalar_t>(top + std::log(z));
        pairs += static_cast<int64_t>(keys.size());
      }
    }
    kept[static_cast<size_t>(s * sh.kv_heads + kv)] = pairs;
  });
  plan.kept_pairs.assign(static_cast<size_t>(plan.sequences.num_sequences()), 0);
  for (size_t task = 0; task < kept.size(); ++task) plan.kept_pairs[task / static_cast<size_t>(sh.kv_heads)] += kept[task];
}

template <typename scalar_t>
void backward_typed(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& out, const at::Tensor& lse, const VerticalSlashPlan& plan, const Shapes& sh,
                    at::Tensor& dq, at::Tensor& dk, at::Tensor& dv) {
  const scalar_t* gp = grad_out.const_data_ptr<scalar_t>();
  const scalar_t* qp = q.const_data_ptr<scalar_t>();
  const scalar_t* kp = k.const_data_ptr<scalar_t>();
  const scalar_t* vp = v.const_data_ptr<scalar_t>();
  const scalar_t* op = out.const_data_ptr<scalar_t>();
  const scalar_t* lp = lse.const_data_ptr<scalar_t>();
  scalar_t* dqp = dq.mutable_data_ptr<scalar_t>();
  scalar_t* dkp = dk.mutable_data_ptr<scalar_t>();
  scalar_t* dvp = dv.mutable_data_ptr<scalar_t>();
  const int64_t D = sh.dim;
  for_each_task(plan, sh, [&](int64_t s, int64_t offset, int64_t length, int64_t kv) {
    if (length == 0) return;
    // This task owns the sequence's dK and dV rows of head kv: accumulate them in float64.
    std::vector<double> dk_acc(static_cast<size_t>(length * D), 0.0), dv_acc(dk_acc.size(), 0.0), dq_row(D);
    std::vector<int64_t> keys;
    for (int64_t h = kv * sh.group; h < (kv + 1) * sh.group; ++h) {
      const VerticalSlashHeadIndex& index = plan.index[static_cast<size_t>(s)][static_cast<size_t>(h)];
      const std::vector<char> is_vertical = vertical_flags(index, length);
      for (int64_t i = 0; i < length; ++i) {
        row_keys(index, is_vertical, i, keys);
        const int64_t row = (offset + i) * sh.q_heads + h;
        const scalar_t* qi = qp + row * D;
        const scalar_t* gi = gp + row * D;
        const double delta = dot(gi, op + row * D, D);  // rowsum(dO * O)
        const double row_lse = static_cast<double>(lp[row]);
        std::fill(dq_row.begin(), dq_row.end(), 0.0);
        for (int64_t j : keys) {
          const scalar_t* kj = kp + ((offset + j) * sh.kv_heads + kv) * D;
          const scalar_t* vj = vp + ((offset + j) * sh.kv_heads + kv) * D;
          const double p = std::exp(plan.scale * dot(qi, kj, D) - row_lse);
          const double ds = p * (dot(gi, vj, D) - delta) * plan.scale;
          double* dkj = dk_acc.data() + j * D;
          double* dvj = dv_acc.data() + j * D;
          for (int64_t d = 0; d < D; ++d) {
            dq_row[static_cast<size_t>(d)] += ds * static_cast<double>(kj[d]);
            dkj[d] += ds * static_cast<double>(qi[d]);
            dvj[d] += p * static_cast<double>(gi[d]);
          }
        }
        scalar_t* dqi = dqp + row * D;
        for (int64_t d = 0; d < D; ++d) dqi[d] = static_cast<scalar_t>(dq_row[static_cast<size_t>(d)]);
      }
    }
    for (int64_t j = 0; j < length; ++j) {
      scalar_t* dkj = dkp + ((offset + j) * sh.kv_heads + kv) * D;
      scalar_t* dvj = dvp + ((offset + j) * sh.kv_heads + kv) * D;
      for (int64_t d = 0; d < D; ++d) {
        dkj[d] = static_cast<scalar_t>(dk_acc[static_cast<size_t>(j * D + d)]);
        dvj[d] = static_cast<scalar_t>(dv_acc[static_cast<size_t>(j * D + d)]);
      }
    }
  });
}

Shapes shapes_of(const at::Tensor& q, const at::Tensor& k) {
  return {q.size(1), k.size(1), q.size(2), q.size(1) / k.size(1)};
}

class VerticalSlashFunction : public torch::autograd::Function<VerticalSlashFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q,
                                                const at::Tensor& k, const at::Tensor& v,
                                                const c10::intrusive_ptr<VerticalSlashPlan>& plan) {
    at::Tensor out = at::empty_like(q);
    at::Tensor lse = at::empty({q.size(0), q.size(1)}, q.options());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "vertical_slash_forward",
                               [&] { forward_typed<scalar_t>(q, k, v, *plan, shapes_of(q, k), out, lse); });
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["plan"] = at::IValue::make_capsule(plan);
    ctx->mark_non_differentiable({lse});
    return {out, lse};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto plan =
        c10::static_intrusive_pointer_cast<VerticalSlashPlan>(ctx->saved_data["plan"].toCapsule());
    const at::Tensor& q = saved[0];
    const at::Tensor grad_out = grads[0].defined() ? grads[0].contiguous() : at::zeros_like(saved[3]);
    at::Tensor dq = at::empty_like(q), dk = at::empty_like(saved[1]), dv = at::empty_like(saved[2]);
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "vertical_slash_backward", [&] {
      backward_typed<scalar_t>(grad_out, q, saved[1], saved[2], saved[3], saved[4], *plan, shapes_of(q, saved[1]),
                               dq, dk, dv);
    });
    return {dq, dk, dv, at::Tensor()};
  }
};

}  // namespace

VerticalSlashAttentionResult vertical_slash_attention_cpu(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const PackedSequences& sequences,
    const std::vector<std::vector<VerticalSlashHeadIndex>>& index, double scale) {
  TORCH_CHECK(q.device().is_cpu() && k.device().is_cpu() && v.device().is_cpu(),
              "vertical-slash attention: CPU tensors expected");
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.sizes() == k.sizes() && q.size(2) == k.size(2),
              "vertical-slash attention: q [T, Hq, D], k and v [T, Hkv, D]");
  TORCH_CHECK(q.scalar_type() == k.scalar_type() && k.scalar_type() == v.scalar_type() &&
                  (q.scalar_type() == at::kFloat || q.scalar_type() == at::kDouble),
              "vertical-slash attention: float32 or float64 q, k, v of one dtype");
  TORCH_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, "vertical-slash attention: Hq must be a multiple of Hkv");
  TORCH_CHECK(q.size(0) == sequences.total_tokens() && k.size(0) == sequences.total_tokens(),
              "vertical-slash attention: q, k, v must hold the packed sequences' ", sequences.total_tokens(),
              " tokens");
  TORCH_CHECK(static_cast<int64_t>(index.size()) == sequences.num_sequences(),
              "vertical-slash attention: one index per sequence expected");
  for (size_t s = 0; s < index.size(); ++s) {
    TORCH_CHECK(static_cast<int64_t>(index[s].size()) == q.size(1) || sequences.length(static_cast<int64_t>(s)) == 0,
                "vertical-slash attention: one index per query head expected (sequence ", s, ")");
  }
  auto plan = c10::make_intrusive<VerticalSlashPlan>();
  plan->sequences = sequences;
  plan->index = index;
  plan->scale = scale;
  const auto outputs = VerticalSlashFunction::apply(q.contiguous(), k.contiguous(), v.contiguous(), plan);
  VerticalSlashAttentionResult result{outputs[0], outputs[1], 0, plan->kept_pairs};
  for (int64_t n : plan->kept_pairs) result.kept_pairs += n;
  return result;
}

}  // namespace sb
