#include "kernels/attention/patterns/vertical_slash/vertical_slash_attention_cpu.h"

#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/custom_class.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>

#include "kernels/attention/core/single_threaded_blas.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_blocks.h"

namespace sb {
namespace {

// What the backward needs besides tensors; travels through autograd as a capsule.
struct VerticalSlashPlan : torch::CustomClassHolder {
  PackedSequences sequences;
  std::vector<std::vector<VerticalSlashHeadIndex>> index;
  double scale = 0;
  std::vector<int64_t> kept_pairs;  // per sequence, set by the forward
};

struct Shapes {
  int64_t q_heads, kv_heads, dim, group;
};

// One (sequence, query head, query block): its queries' positions and its key list.
struct Tile {
  int64_t offset = 0;       // the sequence's first token in the packed tensors
  int64_t head = 0;         // query head
  int64_t first = 0;        // first query position in the sequence
  int64_t rows = 0;         // queries in the block
  std::vector<int64_t> keys;  // kept key positions, ascending (vertical_slash_block_keys)

  // Row r sees keys[0 .. visible(r)): the rest lie past its position.
  int64_t visible(int64_t r) const {
    return std::upper_bound(keys.begin(), keys.end(), first + r) - keys.begin();
  }
  int64_t pairs() const { return vertical_slash_block_pairs(keys, first, rows); }
  // The block's rows of x [T, H, D] for this head: a strided [rows, D] view (q, out, dO,
  // dQ), or [rows] of x [T, H] (lse, delta).
  at::Tensor rows_of(const at::Tensor& x) const { return x.select(1, head).narrow(0, offset + first, rows); }
};

// Buffers a task reuses for every tile, sized for the longest key list possible (the
// sequence) and a full query block: allocating per tile costs page faults at these sizes.
struct TileScratch {
  at::Tensor keys, values, grad_keys, grad_values;  // [max_keys * D]
  at::Tensor scores, probs, grad_scores;            // [block * max_keys]

  TileScratch(int64_t max_keys, int64_t block, int64_t dim, const at::TensorOptions& options, bool backward)
      : keys(at::empty({max_keys * dim}, options)),
        values(at::empty({max_keys * dim}, options)),
        scores(at::empty({block * max_keys}, options)),
        probs(at::empty({block * max_keys}, options)) {
    if (backward) {
      grad_keys = at::empty({max_keys * dim}, options);
      grad_values = at::empty({max_keys * dim}, options);
      grad_scores = at::empty({block * max_keys}, options);
    }
  }
  // The first rows * cols elements of buffer as a contiguous [rows, cols] matrix.
  static at::Tensor matrix(const at::Tensor& buffer, int64_t rows, int64_t cols) {
    return buffer.narrow(0, 0, rows * cols).view({rows, cols});
  }
};

// Copies the tile's key (or value) rows of key/value head `kv` together: [n, D].
template <typename scalar_t>
at::Tensor gather_keys(const at::Tensor& x, const Tile& tile, int64_t kv, const Shapes& sh, const at::Tensor& buffer) {
  const auto n = static_cast<int64_t>(tile.keys.size());
  at::Tensor gathered = TileScratch::matrix(buffer, n, sh.dim);
  scalar_t* dst = gathered.mutable_data_ptr<scalar_t>();
  const scalar_t* src = x.const_data_ptr<scalar_t>();
  for (const int64_t j : tile.keys) {
    std::memcpy(dst, src + ((tile.offset + j) * sh.kv_heads + kv) * sh.dim, sizeof(scalar_t) * sh.dim);
    dst += sh.dim;
  }
  return gathered;
}

// The tile's probabilities [rows, n] (in scratch.probs): softmax of the scaled scores (in
// scratch.scores), each row's keys past its position masked.
template <typename scalar_t>
at::Tensor tile_probabilities(const at::Tensor& queries, const at::Tensor& keys, const Tile& tile, double scale,
                              TileScratch& scratch) {
  const int64_t n = keys.size(0);
  at::Tensor scores = TileScratch::matrix(scratch.scores, tile.rows, n);
  at::addmm_out(scores, scores, queries, keys.t(), /*beta=*/0, /*alpha=*/scale);
  scalar_t* s = scores.mutable_data_ptr<scalar_t>();
  for (int64_t r = 0; r < tile.rows; ++r) {
    std::fill(s + r * n + tile.visible(r), s + (r + 1) * n, -std::numeric_limits<scalar_t>::infinity());
  }
  at::Tensor probs = TileScratch::matrix(scratch.probs, tile.rows, n);
  at::_softmax_out(probs, scores, 1, /*half_to_float=*/false);
  return probs;
}

// Runs body(tile, kv, scratch) for every tile, in parallel over (sequence, key/value
// head) tasks; a task walks its query heads and query blocks in order.
template <class Body>
void for_each_tile(const VerticalSlashPlan& plan, const Shapes& sh, const at::TensorOptions& options, bool backward,
                   Body body) {
  const int64_t tasks = plan.sequences.num_sequences() * sh.kv_heads;
  at::parallel_for(0, tasks, 1, [&](int64_t begin, int64_t end) {
    const c10::NoGradGuard no_grad;  // grad mode is per thread; workers start with it on
    const SingleThreadedBlas single_threaded_blas;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t s = task / sh.kv_heads, kv = task % sh.kv_heads, length = plan.sequences.length(s);
      if (length == 0) continue;
      const auto& heads = plan.index[static_cast<size_t>(s)];
      const int64_t block = heads[static_cast<size_t>(kv * sh.group)].block_size;
      TileScratch scratch(length, std::min(block, length), sh.dim, options, backward);
      Tile tile;
      tile.offset = plan.sequences.offsets[static_cast<size_t>(s)];
      for (int64_t h = kv * sh.group; h < (kv + 1) * sh.group; ++h) {
        const VerticalSlashHeadIndex& index = heads[static_cast<size_t>(h)];
        tile.head = h;
        for (int64_t m = 0; m < vertical_slash_query_blocks(index, length); ++m) {
          tile.first = m * index.block_size;
          tile.rows = std::min(index.block_size, length - tile.first);
          vertical_slash_block_keys(index, m, length, tile.keys);
          body(s, tile, kv, scratch);
        }
      }
    }
  });
}

template <typename scalar_t>
void forward_typed(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, VerticalSlashPlan& plan,
                   const Shapes& sh, at::Tensor& out, at::Tensor& lse) {
  std::vector<int64_t> pairs(static_cast<size_t>(plan.sequences.num_sequences() * sh.kv_heads), 0);
  for_each_tile(plan, sh, q.options(), /*backward=*/false,
                [&](int64_t s, const Tile& tile, int64_t kv, TileScratch& scratch) {
                  const at::Tensor keys = gather_keys<scalar_t>(k, tile, kv, sh, scratch.keys);
                  const at::Tensor values = gather_keys<scalar_t>(v, tile, kv, sh, scratch.values);
                  const at::Tensor probs = tile_probabilities<scalar_t>(tile.rows_of(q), keys, tile, plan.scale, scratch);
                  at::Tensor out_rows = tile.rows_of(out);
                  at::mm_out(out_rows, probs, values);
                  // lse = max - log(p_max): the largest probability is >= 1 / n, so its log
                  // is exact to rounding.
                  const at::Tensor scores = TileScratch::matrix(scratch.scores, tile.rows, keys.size(0));
                  tile.rows_of(lse).copy_(scores.amax(1) - probs.amax(1).log());
                  pairs[static_cast<size_t>(s * sh.kv_heads + kv)] += tile.pairs();
                });
  plan.kept_pairs.assign(static_cast<size_t>(plan.sequences.num_sequences()), 0);
  for (size_t task = 0; task < pairs.size(); ++task) {
    plan.kept_pairs[task / static_cast<size_t>(sh.kv_heads)] += pairs[task];
  }
}

// Adds the tile's staged gradient rows grad [n, D] into the packed gradient of one
// key/value head: row j of the sequence at dst + j x kv_heads x D.
template <typename scalar_t>
void scatter_add_rows(const at::Tensor& grad, const Tile& tile, const Shapes& sh, scalar_t* dst) {
  const scalar_t* g = grad.const_data_ptr<scalar_t>();
  for (const int64_t j : tile.keys) {
    scalar_t* row = dst + j * sh.kv_heads * sh.dim;
    for (int64_t d = 0; d < sh.dim; ++d) row[d] += g[d];
    g += sh.dim;
  }
}

template <typename scalar_t>
void backward_typed(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& out, const VerticalSlashPlan& plan, const Shapes& sh, at::Tensor& dq,
                    at::Tensor& dk, at::Tensor& dv) {
  const at::Tensor delta = (grad_out * out).sum(-1);  // [T, Hq]: rowsum(dO * O)
  // Each task's tiles add into their sequence's rows of head kv only, which no other task
  // touches: dk and dv start at zero and collect in tile order.
  scalar_t* dkp = dk.mutable_data_ptr<scalar_t>();
  scalar_t* dvp = dv.mutable_data_ptr<scalar_t>();
  for_each_tile(plan, sh, q.options(), /*backward=*/true,
                [&](int64_t, const Tile& tile, int64_t kv, TileScratch& scratch) {
                  const auto n = static_cast<int64_t>(tile.keys.size());
                  const at::Tensor keys = gather_keys<scalar_t>(k, tile, kv, sh, scratch.keys);
                  const at::Tensor values = gather_keys<scalar_t>(v, tile, kv, sh, scratch.values);
                  const at::Tensor queries = tile.rows_of(q);          // [rows, D]
                  const at::Tensor grad_rows = tile.rows_of(grad_out);  // [rows, D]
                  const at::Tensor probs = tile_probabilities<scalar_t>(queries, keys, tile, plan.scale, scratch);
                  at::Tensor grad_scores = TileScratch::matrix(scratch.grad_scores, tile.rows, n);
                  at::mm_out(grad_scores, grad_rows, values.t());                       // dP
                  grad_scores.sub_(tile.rows_of(delta).unsqueeze(1)).mul_(probs);      // dS
                  at::Tensor dq_rows = tile.rows_of(dq);
                  at::addmm_out(dq_rows, dq_rows, grad_scores, keys, /*beta=*/0, /*alpha=*/plan.scale);
                  at::Tensor grad_keys = TileScratch::matrix(scratch.grad_keys, n, sh.dim);
                  at::addmm_out(grad_keys, grad_keys, grad_scores.t(), queries, /*beta=*/0, /*alpha=*/plan.scale);
                  at::Tensor grad_values = TileScratch::matrix(scratch.grad_values, n, sh.dim);
                  at::mm_out(grad_values, probs.t(), grad_rows);
                  // Rows of head kv: stride kv_heads * D between positions.
                  const int64_t first_row = (tile.offset * sh.kv_heads + kv) * sh.dim;
                  scatter_add_rows(grad_keys, tile, sh, dkp + first_row);
                  scatter_add_rows(grad_values, tile, sh, dvp + first_row);
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
    at::Tensor out = at::empty_like(q);  // every query belongs to one tile per head
    at::Tensor lse = at::empty({q.size(0), q.size(1)}, q.options());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "vertical_slash_forward",
                               [&] { forward_typed<scalar_t>(q, k, v, *plan, shapes_of(q, k), out, lse); });
    ctx->save_for_backward({q, k, v, out});
    ctx->saved_data["plan"] = at::IValue::make_capsule(plan);
    ctx->mark_non_differentiable({lse});
    return {out, lse};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto plan =
        c10::static_intrusive_pointer_cast<VerticalSlashPlan>(ctx->saved_data["plan"].toCapsule());
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3];
    at::Tensor dq = at::zeros_like(q), dk = at::zeros_like(k), dv = at::zeros_like(v);
    if (grads[0].defined()) {
      const at::Tensor grad_out = grads[0].contiguous();
      AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "vertical_slash_backward", [&] {
        backward_typed<scalar_t>(grad_out, q, k, v, out, *plan, shapes_of(q, k), dq, dk, dv);
      });
    }
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
  const int64_t group = k.size(1) > 0 ? q.size(1) / k.size(1) : 1;
  for (size_t s = 0; s < index.size(); ++s) {
    if (sequences.length(static_cast<int64_t>(s)) == 0) continue;
    TORCH_CHECK(static_cast<int64_t>(index[s].size()) == q.size(1),
                "vertical-slash attention: one index per query head expected (sequence ", s, ")");
    for (size_t h = 0; h < index[s].size(); ++h) {
      const VerticalSlashHeadIndex& head = index[s][h];
      TORCH_CHECK(!head.slashes.empty() && head.slashes.front() == 0,
                  "vertical-slash attention: every head must keep offset 0 (each query itself); sequence ", s,
                  ", head ", h);
      // Entries past the sequence are harmless (no query reaches them); negative or
      // unsorted ones would break the block lists.
      for (const std::vector<int64_t>* list : {&head.verticals, &head.slashes}) {
        TORCH_CHECK(std::adjacent_find(list->begin(), list->end(), std::greater_equal<int64_t>()) == list->end() &&
                        (list->empty() || list->front() >= 0),
                    "vertical-slash attention: verticals and slashes must be >= 0 and strictly ascending; sequence ",
                    s, ", head ", h);
      }
      TORCH_CHECK(head.block_size == index[s][h - h % static_cast<size_t>(group)].block_size && head.block_size >= 1,
                  "vertical-slash attention: the query heads of a key/value head share one block_size >= 1");
    }
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
