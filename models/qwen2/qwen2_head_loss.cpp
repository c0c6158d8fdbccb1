#include "models/qwen2/qwen2_head_loss.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "models/qwen2/qwen2_precision.h"

namespace sb {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kChunkLogitBytes = int64_t{256} << 20;

// The dtype the head's matmul runs in: what autocast would cast it to, else the inputs'.
at::ScalarType head_compute_dtype(const at::Tensor& normed) {
  const c10::DeviceType type = normed.device().type();
  return at::autocast::is_autocast_enabled(type) ? at::autocast::get_autocast_dtype(type) : normed.scalar_type();
}

int64_t rows_per_chunk(const HeadLossOptions& options, int64_t columns) {
  return options.chunk_rows > 0 ? options.chunk_rows : head_loss_chunk_rows(columns);
}

// Which rows count and where their label sits among this weight's rows.
struct LabelColumns {
  at::Tensor valid;   // [T] bool: label >= 0
  at::Tensor mine;    // [T] bool: valid and held by this weight
  at::Tensor column;  // [T] int64: the label's row of the weight where mine, else 0
};

LabelColumns label_columns(const at::Tensor& labels, int64_t start, int64_t columns) {
  LabelColumns c;
  c.valid = labels.ge(0);
  c.mine = c.valid & labels.ge(start) & labels.lt(start + columns);
  c.column = at::where(c.mine, labels - start, at::zeros_like(labels));
  return c;
}

// The dtype of logits and statistics: float32, or float64 for float64 inputs.
at::ScalarType statistics_dtype(at::ScalarType compute) {
  return compute == at::kDouble ? at::kDouble : at::kFloat;
}

// One chunk's logits [n, Vr] widened to the statistics dtype: rows [begin, begin + n)
// of normed times the head.
at::Tensor chunk_logits(const at::Tensor& normed, const at::Tensor& head, int64_t begin, int64_t n,
                        at::ScalarType dtype) {
  return at::matmul(normed.narrow(0, begin, n).to(dtype), head.t()).to(statistics_dtype(dtype));
}

struct RowLoss {
  at::Tensor loss;  // [T] float32, 0 on ignored rows
  at::Tensor lse;   // [T] float32: log sum over the whole vocabulary of exp(logit)
};

RowLoss row_loss(const at::Tensor& normed, const at::Tensor& weight, const at::Tensor& labels,
                 const HeadLossOptions& options, at::ScalarType dtype) {
  const int64_t tokens = normed.size(0), columns = weight.size(0);
  const int64_t rows = rows_per_chunk(options, columns);
  const LabelColumns labelled = label_columns(labels, options.vocabulary_start, columns);
  const auto f32 = normed.options().dtype(statistics_dtype(dtype));
  at::Tensor maxima = at::empty({tokens}, f32), sums = at::empty({tokens}, f32), label_logit = at::empty({tokens}, f32);
  const at::Tensor head = weight.to(dtype);  // [Vr, H], once for every chunk
  for (int64_t begin = 0; begin < tokens; begin += rows) {
    const int64_t n = std::min(rows, tokens - begin);
    const at::Tensor z = chunk_logits(normed, head, begin, n, dtype);  // [n, Vr]
    const at::Tensor m = std::get<0>(z.max(1));                       // [n]
    maxima.narrow(0, begin, n).copy_(m);
    sums.narrow(0, begin, n).copy_((z - m.unsqueeze(1)).exp_().sum(1));
    label_logit.narrow(0, begin, n).copy_(z.gather(1, labelled.column.narrow(0, begin, n).unsqueeze(1)).squeeze(1));
  }
  const at::Tensor zero = at::zeros_like(label_logit);
  RowLoss out;
  if (options.reduce) {
    // Shift every rank's sums to the maximum over the whole vocabulary, then add them
    // up with the label's logit (held by exactly one rank).
    at::Tensor global = maxima.clone();
    options.reduce(global, /*maximum=*/true);
    at::Tensor shifted =
        at::stack({sums * (maxima - global).exp(), at::where(labelled.mine, label_logit - global, zero)}).contiguous();
    options.reduce(shifted, /*maximum=*/false);
    const at::Tensor log_sum = shifted[0].log();
    out.lse = global + log_sum;
    out.loss = at::where(labelled.valid, log_sum - shifted[1], zero);
  } else {
    out.lse = maxima + sums.log();
    out.loss = at::where(labelled.valid, out.lse - label_logit, zero);
  }
  return out;
}

void check_inputs(const at::Tensor& normed, const at::Tensor& weight, const at::Tensor& labels) {
  if (normed.dim() != 2 || weight.dim() != 2 || normed.size(1) != weight.size(1) || weight.size(0) < 1 ||
      labels.dim() != 1 || labels.size(0) != normed.size(0) || labels.scalar_type() != at::kLong) {
    throw std::invalid_argument("head_cross_entropy: expected normed [T, H], weight [V, H] and labels [T] int64, got " +
                                c10::str(normed.sizes(), ", ", weight.sizes(), " and ", labels.sizes(), " ",
                                         labels.scalar_type()));
  }
}

struct HeadCrossEntropy : torch::autograd::Function<HeadCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& normed, const at::Tensor& weight,
                            const at::Tensor& labels, const HeadLossOptions* options) {
    const at::ScalarType dtype = head_compute_dtype(normed);
    const Qwen2AutocastGuard plain{Qwen2AutocastState{}};  // the casts are explicit
    const RowLoss rows = row_loss(normed, weight, labels, *options, dtype);
    ctx->save_for_backward({normed, weight, labels, rows.lse});
    ctx->saved_data["dtype"] = static_cast<int64_t>(dtype);
    ctx->saved_data["start"] = options->vocabulary_start;
    ctx->saved_data["rows"] = rows_per_chunk(*options, weight.size(0));
    return rows.loss.sum();
  }

  // d loss / d logit = softmax over the whole vocabulary - onehot(label), on valid rows;
  // each chunk's logits are recomputed, never all at once.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &normed = saved[0], &weight = saved[1], &labels = saved[2], &lse = saved[3];
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    const int64_t rows = ctx->saved_data["rows"].toInt();
    const Qwen2AutocastGuard plain{Qwen2AutocastState{}};
    const int64_t tokens = normed.size(0), columns = weight.size(0);
    const LabelColumns labelled = label_columns(labels, ctx->saved_data["start"].toInt(), columns);
    const at::ScalarType wide = statistics_dtype(dtype);
    const at::Tensor scale = labelled.valid.to(wide) * grads[0].to(wide);  // [T]
    const at::Tensor head = weight.to(dtype);
    at::Tensor grad_normed, grad_weight;
    if (ctx->needs_input_grad(0)) grad_normed = at::empty_like(normed);
    if (ctx->needs_input_grad(1)) grad_weight = at::zeros(weight.sizes(), weight.options().dtype(wide));
    for (int64_t begin = 0; begin < tokens; begin += rows) {
      const int64_t n = std::min(rows, tokens - begin);
      at::Tensor p = chunk_logits(normed, head, begin, n, dtype);  // [n, Vr] -> softmax -> gradient
      p.sub_(lse.narrow(0, begin, n).unsqueeze(1)).exp_();
      p.scatter_add_(1, labelled.column.narrow(0, begin, n).unsqueeze(1),
                     -labelled.mine.narrow(0, begin, n).to(wide).unsqueeze(1));
      p.mul_(scale.narrow(0, begin, n).unsqueeze(1));
      const at::Tensor g = p.to(dtype);
      if (grad_normed.defined()) grad_normed.narrow(0, begin, n).copy_(at::matmul(g, head));
      if (grad_weight.defined()) grad_weight.add_(at::matmul(g.t(), normed.narrow(0, begin, n).to(dtype)));
    }
    if (grad_weight.defined()) grad_weight = grad_weight.to(weight.scalar_type());
    return {grad_normed, grad_weight, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

int64_t head_loss_chunk_rows(int64_t vocabulary_columns) {
  return std::max<int64_t>(1, kChunkLogitBytes / (4 * std::max<int64_t>(1, vocabulary_columns)));
}

at::Tensor head_cross_entropy_sum(const at::Tensor& normed, const at::Tensor& weight, const at::Tensor& labels,
                                  const HeadLossOptions& options) {
  check_inputs(normed, weight, labels);
  return HeadCrossEntropy::apply(normed, weight, labels, &options);
}

at::Tensor head_token_losses(const at::Tensor& normed, const at::Tensor& weight, const at::Tensor& labels,
                             const HeadLossOptions& options) {
  check_inputs(normed, weight, labels);
  c10::NoGradGuard no_grad;
  const at::ScalarType dtype = head_compute_dtype(normed);
  const Qwen2AutocastGuard plain{Qwen2AutocastState{}};
  return row_loss(normed, weight, labels, options, dtype).loss;
}

}  // namespace sb
