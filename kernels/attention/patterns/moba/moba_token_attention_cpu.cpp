#include "kernels/attention/patterns/moba/moba_token_attention_cpu.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/attention/core/gathered_rows_attention_cpu.h"
#include "kernels/attention/core/single_threaded_blas.h"
#include "kernels/attention/patterns/moba/moba_attention_cpu.h"

namespace sb {
namespace {

// What the kernel reads besides q, k, v: the layout, and for every (query head, key
// block) the queries that chose the block besides their own, ascending (CSR).
struct TokenProblem : torch::CustomClassHolder {
  BlockLayout layout;
  std::vector<int64_t> first;    // [Hq * NB + 1]
  std::vector<int64_t> readers;  // packed query indices
  bool causal = true;
  double scale = 1.0;

  TokenProblem(const BlockLayout& l, const at::Tensor& selected, double s)
      : layout(l), causal(l.causal), scale(s) {
    const at::Tensor ids_t = selected.to(at::kInt).cpu().contiguous();  // [Hq, Tq, kcap]
    const int64_t heads = ids_t.size(0), tq = ids_t.size(1), capacity = ids_t.size(2), blocks = l.num_blocks();
    std::vector<int64_t> own(tq, 0);
    for (int64_t b = 0; b < blocks; ++b) {
      for (int64_t r = 0; r < l.blocks[b].query_len; ++r) own[l.blocks[b].query_start + r] = b;
    }
    const int32_t* ids = ids_t.const_data_ptr<int32_t>();
    first.assign(heads * blocks + 1, 0);
    const auto for_each_reader = [&](auto&& visit) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t t = 0; t < tq; ++t) {
          for (int64_t s = 0; s < capacity; ++s) {
            const int64_t j = ids[(h * tq + t) * capacity + s];
            if (j < 0) break;
            if (j != own[t]) visit(h * blocks + j, t);
          }
        }
      }
    };
    for_each_reader([&](int64_t key, int64_t) { ++first[key + 1]; });
    for (size_t i = 1; i < first.size(); ++i) first[i] += first[i - 1];
    readers.resize(first.back());
    std::vector<int64_t> fill(first.begin(), first.end() - 1);
    for_each_reader([&](int64_t key, int64_t t) { readers[fill[key]++] = t; });
  }

  // The queries reading block j under head h: those of j itself (the first `own` of
  // them, causal), then the others, into rows.
  int64_t rows_of(int64_t h, int64_t j, std::vector<int64_t>& rows) const {
    rows.clear();
    const LayoutBlock& block = layout.blocks[j];
    for (int64_t r = 0; r < block.query_len; ++r) rows.push_back(block.query_start + r);
    const int64_t key = h * layout.num_blocks() + j;
    rows.insert(rows.end(), readers.begin() + first[key], readers.begin() + first[key + 1]);
    return block.query_len;
  }
};

// Block j's keys and values of key/value head g: [len, D] views of k and v.
std::pair<at::Tensor, at::Tensor> block_keys(const at::Tensor& k, const at::Tensor& v, const LayoutBlock& block,
                                             int64_t g) {
  return {k.narrow(0, block.key_start, block.key_len).select(1, g),
          v.narrow(0, block.key_start, block.key_len).select(1, g)};
}

// Scaled scores [rows, keys] of the gathered queries against block j's keys, the first
// `own` rows (block j's queries) masked causally: in-block position p sees keys 0 .. p.
template <typename scalar_t>
at::Tensor block_scores(const at::Tensor& queries, const at::Tensor& keys, const TokenProblem& p, int64_t j,
                        int64_t own) {
  at::Tensor scores = at::mm(queries, keys.t()).mul_(p.scale);
  if (!p.causal) return scores;
  const LayoutBlock& block = p.layout.blocks[j];
  const int64_t len = scores.size(1);
  scalar_t* s = scores.mutable_data_ptr<scalar_t>();
  for (int64_t r = 0; r < own; ++r) {
    std::fill(s + r * len + std::min(block.query_pos0 + r + 1, len), s + (r + 1) * len,
              -std::numeric_limits<scalar_t>::infinity());
  }
  return scores;
}

// The sequence's query range [first, first + count) in the packed q.
std::pair<int64_t, int64_t> sequence_queries(const BlockLayout& layout, int64_t s) {
  int64_t first = -1, count = 0;
  for (int64_t b = layout.sequence_first_block[s]; b < layout.sequence_first_block[s + 1]; ++b) {
    if (layout.blocks[b].query_len > 0 && first < 0) first = layout.blocks[b].query_start;
    count += layout.blocks[b].query_len;
  }
  return {std::max<int64_t>(first, 0), count};
}

template <typename scalar_t>
void forward_typed(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const TokenProblem& p,
                   at::Tensor& out, at::Tensor& lse) {
  const int64_t q_heads = q.size(1), group = q_heads / k.size(1), dim = q.size(2);
  const int64_t sequences = p.layout.num_sequences();
  scalar_t* acc = out.mutable_data_ptr<scalar_t>();  // zeros: the running outputs
  scalar_t* lse_out = lse.mutable_data_ptr<scalar_t>();
  at::parallel_for(0, q_heads * sequences, 1, [&](int64_t i0, int64_t i1) {
    const c10::NoGradGuard no_grad;  // grad mode is per thread; workers start with it on
    const SingleThreadedBlas single_threaded_blas;
    std::vector<int64_t> rows;
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t h = item / sequences, s = item % sequences, g = h / group;
      const auto [first_query, count] = sequence_queries(p.layout, s);
      if (count == 0) continue;
      std::vector<scalar_t> running_max(count, -std::numeric_limits<scalar_t>::infinity()), running_sum(count, 0);
      OnlineSoftmaxRows<scalar_t> softmax{acc, q_heads, dim, h, running_max.data(), running_sum.data(), first_query};
      for (int64_t j = p.layout.sequence_first_block[s]; j < p.layout.sequence_first_block[s + 1]; ++j) {
        const int64_t own = p.rows_of(h, j, rows);
        if (rows.empty()) continue;
        const auto [keys, values] = block_keys(k, v, p.layout.blocks[j], g);
        at::Tensor scores = block_scores<scalar_t>(gather_head_rows<scalar_t>(q, h, rows), keys, p, j, own);
        softmax.add(scores, values, rows);
      }
      for (int64_t t = first_query; t < first_query + count; ++t) softmax.finish(t, lse_out);  // all read their own block
    }
  });
}

template <typename scalar_t>
void backward_typed(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& out, const at::Tensor& lse, const TokenProblem& p, at::Tensor& dq,
                    at::Tensor& dk, at::Tensor& dv) {
  const int64_t q_heads = q.size(1), kv_heads = k.size(1), group = q_heads / kv_heads;
  const int64_t sequences = p.layout.num_sequences();
  const at::Tensor delta = (grad_out * out).sum(-1).contiguous();  // [Tq, Hq]: rowsum(dO * O)
  const scalar_t* lse_in = lse.const_data_ptr<scalar_t>();
  const scalar_t* delta_in = delta.const_data_ptr<scalar_t>();
  scalar_t* dq_out = dq.mutable_data_ptr<scalar_t>();
  // A unit (key/value head, sequence) owns its keys' gradients and its query heads' dq rows.
  at::parallel_for(0, kv_heads * sequences, 1, [&](int64_t i0, int64_t i1) {
    const c10::NoGradGuard no_grad;
    const SingleThreadedBlas single_threaded_blas;
    std::vector<int64_t> rows;
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t g = item / sequences, s = item % sequences;
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        for (int64_t j = p.layout.sequence_first_block[s]; j < p.layout.sequence_first_block[s + 1]; ++j) {
          const int64_t own = p.rows_of(h, j, rows);
          if (rows.empty()) continue;
          const LayoutBlock& block = p.layout.blocks[j];
          const auto [keys, values] = block_keys(k, v, block, g);
          const at::Tensor queries = gather_head_rows<scalar_t>(q, h, rows);
          const at::Tensor grads = gather_head_rows<scalar_t>(grad_out, h, rows);
          at::Tensor scores = block_scores<scalar_t>(queries, keys, p, j, own);
          at::Tensor dk_rows = dk.narrow(0, block.key_start, block.key_len).select(1, g);
          at::Tensor dv_rows = dv.narrow(0, block.key_start, block.key_len).select(1, g);
          gathered_rows_backward<scalar_t>(scores, queries, grads, keys, values, rows, h, q_heads, lse_in, delta_in,
                                           p.scale, dq_out, dk_rows, dv_rows);
        }
      }
    }
  });
}

class MobaTokenCpuFunction : public torch::autograd::Function<MobaTokenCpuFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q,
                                                const at::Tensor& k, const at::Tensor& v,
                                                const c10::intrusive_ptr<TokenProblem>& problem) {
    at::Tensor out = at::zeros_like(q);                               // [Tq, Hq, D]
    at::Tensor lse = at::empty({q.size(0), q.size(1)}, q.options());  // [Tq, Hq]
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "moba_token_cpu_forward",
                               [&] { forward_typed<scalar_t>(q, k, v, *problem, out, lse); });
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["problem"] = c10::IValue::make_capsule(problem);
    ctx->mark_non_differentiable({lse});
    return {out, lse};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    const auto problem = c10::static_intrusive_pointer_cast<TokenProblem>(ctx->saved_data["problem"].toCapsule());
    at::Tensor dq = at::zeros_like(q), dk = at::zeros_like(k), dv = at::zeros_like(v);
    if (grads[0].defined()) {
      const at::Tensor grad_out = grads[0].contiguous();
      AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "moba_token_cpu_backward", [&] {
        backward_typed<scalar_t>(grad_out, q, k, v, out, lse, *problem, dq, dk, dv);
      });
    }
    return {dq, dk, dv, at::Tensor()};
  }
};

}  // namespace

std::pair<at::Tensor, at::Tensor> moba_token_attention_cpu(const at::Tensor& q, const at::Tensor& k,
                                                           const at::Tensor& v, const BlockLayout& layout,
                                                           const MobaRouting& routing, double scale) {
  moba_check_cpu_inputs(q, k, v, "moba_token_attention_cpu");
  TORCH_CHECK(routing.gate == MobaGate::kToken, "moba_token_attention_cpu: a token-gate routing expected");
  auto problem = c10::make_intrusive<TokenProblem>(layout, routing.selected, scale);
  auto outputs = MobaTokenCpuFunction::apply(q, k, v, problem);
  return {outputs[0], outputs[1]};
}

}  // namespace sb
