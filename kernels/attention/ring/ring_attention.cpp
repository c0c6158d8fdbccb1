#include "kernels/attention/ring/ring_attention.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/custom_class.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "kernels/attention/ring/ring_column_step_cpu.h"
#include "kernels/attention/ring/ring_query_block_step_cpu.h"
#include "kernels/attention/ring/ring_step_cpu.h"
#include "kernels/attention/core/device_completion.h"

#ifdef SB_WITH_CUDA
#include "kernels/attention/core/cuda/block_sparse_attention_cuda.h"
#include "kernels/attention/core/cuda/block_sparse_attention_kernels.h"
#include "kernels/attention/ring/cuda/ring_step_cuda.h"
#endif

namespace sb {

RingContext::RingContext(c10::intrusive_ptr<c10d::Backend> group, int64_t rank, int64_t size, int64_t inner,
                         std::chrono::milliseconds timeout, std::function<std::string(int64_t)> describe)
    : group_(std::move(group)), rank_(rank), size_(size), inner_(inner == 0 ? size : inner), timeout_(timeout),
      describe_(std::move(describe)) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw std::invalid_argument("ring attention: rank " + std::to_string(rank) + " of a CP group of " +
                                std::to_string(size));
  }
  if (inner_ < 1 || size % inner_ != 0) {
    throw std::invalid_argument("ring attention: cp_inner " + std::to_string(inner) + " must divide cp " +
                                std::to_string(size) + " (ranks per inner ring)");
  }
  if (size > 1 && !group_) throw std::invalid_argument("ring attention: cp > 1 needs a process group");
}

std::string RingContext::describe(int64_t cp_rank) const {
  return describe_ ? describe_(cp_rank) : "cp rank " + std::to_string(cp_rank);
}

void RingContext::record(const RingStepEvent& event) {
  const std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(event);
}

void RingContext::all_reduce(at::Tensor& tensor, c10d::ReduceOp::RedOpType op, const std::string& what, int64_t call) {
  if (size_ == 1) return;
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp(op);
  try {
    wait_until_usable(group_->allreduce(tensors, options), timeout_, tensor.device());
  } catch (const std::exception& e) {
    throw std::runtime_error(describe(rank_) + " could not all-reduce " + what + " (attention call " +
                             std::to_string(call) + ") within " + std::to_string(timeout_.count()) + " ms: " + e.what());
  }
}

std::vector<RingStepEvent> RingContext::take_events() {
  const std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(events_, {});
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since_epoch(Clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}
double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// What travels: kinds of messages (a distinct Gloo/NCCL tag each, per call and step).
enum MessageKind : int64_t { kInnerKv = 0, kOuterKv, kInnerKvBack, kOuterKvBack, kInnerGrad, kOuterGrad, kKinds };
const char* message_name(MessageKind kind) {
  switch (kind) {
    case kInnerKv: case kOuterKv: case kInnerKvBack: case kOuterKvBack: return "key/value shard";
    default: return "key/value gradient accumulator";
  }
}

// The ring's point-to-point transfers with bounded waits and errors naming both ranks.
// Every transfer is a send to one rank paired with a receive from another (or the same)
// posted together. NCCL holds a send on the GPU until its peer's receive runs, so two
// ranks sending to each other (a ring of two, inner rings or outer groups of two) deadlock
// unless each rank's send and receive are fused: where the group coalesces (NCCL), each
// pair is one coalesced batch, whose single work the receive waits on; Gloo posts them
// one by one.
class RingChannel {
 public:
  struct Pending {
    c10::intrusive_ptr<c10d::Work> work;
    bool send = false;
    int64_t peer = 0;
    MessageKind kind = kInnerKv;
    int64_t step = 0;
    c10::Device device = c10::kCPU;  // of the tensor it carries
  };

  RingChannel(RingContext& context, int64_t call) : context_(context), call_(call) {}

  // Sends `out` to CP rank `to` and receives `in` from CP rank `from`: {send, receive}.
  std::pair<Pending, Pending> exchange(const at::Tensor& out, int64_t to, at::Tensor& in, int64_t from,
                                       MessageKind kind, int64_t step) {
    Pending send{nullptr, true, to, kind, step, out.device()}, receive{nullptr, false, from, kind, step, in.device()};
    const c10::intrusive_ptr<c10d::Backend>& group = context_.group();
    const bool coalesce = group->supportsCoalescing();
    std::vector<at::Tensor> outgoing{out}, incoming{in};
    Pending* posting = &send;
    try {
      if (coalesce) group->startCoalescing();
      send.work = group->send(outgoing, static_cast<int>(to), tag(kind, step));
      posting = &receive;
      receive.work = group->recv(incoming, static_cast<int>(from), tag(kind, step));
      // The batch completes as one: its receive waits for it, and the send, which every
      // caller waits for only after that receive, needs no wait of its own (a work is
      // waited once: Gloo's counts completions).
      if (coalesce) {
        receive.work = group->endCoalescing();
        send.work.reset();
      }
    } catch (const std::exception& e) {
      if (coalesce) {
        try {
          group->endCoalescing();  // leave the group usable for the error's way out
        } catch (const std::exception&) {
        }
      }
      fail(*posting, e.what());
    }
    return {send, receive};
  }
  void wait(Pending& pending) {
    if (!pending.work) return;
    try {
      wait_until_usable(pending.work, context_.timeout(), pending.device);  // its arrival is wait, not compute
    } catch (const std::exception& e) {
      fail(pending, e.what());
    }
    pending.work.reset();
  }

 private:
  int tag(MessageKind kind, int64_t step) const {
    return static_cast<int>(((call_ % (int64_t{1} << 16)) * kKinds + kind) * (context_.size() + 1) + step);
  }
  [[noreturn]] void fail(const Pending& p, const std::string& what) const {
    throw std::runtime_error(context_.describe(context_.rank()) + (p.send ? " could not send the " : " could not receive the ") +
                             message_name(p.kind) + " of ring step " + std::to_string(p.step) + " (attention call " +
                             std::to_string(call_) + ")" + (p.send ? " to " : " from ") + context_.describe(p.peer) +
                             ": " + what + " (timeout " + std::to_string(context_.timeout().count()) + " ms)");
  }

  RingContext& context_;
  int64_t call_;
};

// Everything the backward needs besides tensors; travels through autograd as a capsule.
struct RingPlan : torch::CustomClassHolder {
  std::shared_ptr<RingContext> context;
  std::shared_ptr<const RingGeometry> geometry;
  RingBlockPattern pattern;
  std::shared_ptr<const RingColumnLists> columns;  // the columns kept outside the block pattern (null: none)
  std::shared_ptr<const RingQueryBlockLists> query_blocks;  // key blocks kept per query (null: none; CPU only)
  double scale = 0.0;
  int64_t call = 0;

  int64_t rank() const { return context->rank(); }
  int64_t groups() const { return context->size() / context->inner(); }
  // The CP rank at (group, position in group), both taken modulo their ranges.
  int64_t rank_at(int64_t group, int64_t position) const {
    const int64_t inner = context->inner(), g = groups();
    return ((group % g + g) % g) * inner + ((position % inner + inner) % inner);
  }
  int64_t my_group() const { return rank() / context->inner(); }
  int64_t my_position() const { return rank() % context->inner(); }
  RingStepShapes shapes_with(int64_t source) const {
    return {geometry->shards[rank()], geometry->shards[source], pattern, scale};
  }
};

// A shard's keys and values together: [2, n, Hkv, D] (k = [0], v = [1], each contiguous).
at::Tensor empty_pair(const at::Tensor& like, int64_t tokens) {
  return at::empty({2, tokens, like.size(1), like.size(2)}, like.options());
}

// A shard on its way in: the buffer its receive fills, whose shard it is, the receive.
struct Incoming {
  at::Tensor tensor;
  int64_t source = -1;
  RingChannel::Pending pending;
};

// Sends `shard` to CP rank `to` and posts the receive, from CP rank `from`, of the
// shard (keys and values, or their gradient accumulator) of CP rank `arriving`.
Incoming pass_shard(RingChannel& channel, std::vector<RingChannel::Pending>& sends, const at::Tensor& shard,
                    int64_t to, int64_t from, int64_t arriving, const RingPlan& plan, MessageKind kind,
                    int64_t step) {
  Incoming in;
  in.source = arriving;
  in.tensor = empty_pair(shard[0], plan.geometry->shards[arriving].tokens);
  auto [send, receive] = channel.exchange(shard, to, in.tensor, from, kind, step);
  sends.push_back(std::move(send));
  in.pending = std::move(receive);
  return in;
}

// One step's partial attention, on the device the queries live on (GPU: the fused
// block-sparse kernels, out_step in q's dtype and lse_step float32).
int64_t step_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const RingStepShapes& shapes,
                     at::Tensor& out_step, at::Tensor& lse_step) {
#ifdef SB_WITH_CUDA
  if (q.is_cuda()) return ring_step_forward_cuda(q, k, v, shapes, out_step, lse_step);
#endif
  return ring_step_forward(q, k, v, shapes, out_step, lse_step);
}

// The selection's columns outside its blocks against the visiting shard, likewise.
int64_t column_step_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const RingShardTiles& queries,
                            const RingShardTiles& keys, const RingColumnLists& columns, double scale,
                            at::Tensor& out_step, at::Tensor& lse_step) {
#ifdef SB_WITH_CUDA
  if (q.is_cuda()) return ring_column_step_forward_cuda(q, k, v, queries, keys, columns, scale, out_step, lse_step);
#endif
  return ring_column_step_forward(q, k, v, queries, keys, columns, scale, out_step, lse_step);
}

void record_step(RingContext& context, const RingStepEvent& event, Clock::time_point start, Clock::time_point computed) {
  ring_record_step(context, event, start, computed);
}

std::pair<at::Tensor, at::Tensor> ring_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               const RingPlan& plan) {
  RingContext& context = *plan.context;
  RingChannel channel(context, plan.call);
  const int64_t inner = context.inner(), groups = plan.groups(), g = plan.my_group(), i = plan.my_position();
  // On a GPU the running output and lse are float32 (the steps' are q's dtype and float32).
  const at::TensorOptions running = q.is_cuda() ? q.options().dtype(at::kFloat) : q.options();
  at::Tensor out = at::zeros(q.sizes(), running);
  at::Tensor lse = at::full({q.size(0), q.size(1)}, -std::numeric_limits<double>::infinity(), running);
  at::Tensor out_step = at::empty_like(q), lse_step = at::empty_like(lse);
  at::Tensor outer = at::stack({k, v}, 0).contiguous();
  int64_t outer_source = plan.rank();
  std::vector<RingChannel::Pending> sends;
  for (int64_t o = 0; o < groups; ++o) {
    Incoming next_outer;
    if (o + 1 < groups) {
      next_outer = pass_shard(channel, sends, outer, plan.rank_at(g + 1, i), plan.rank_at(g - 1, i),
                              plan.rank_at(g - o - 1, i), plan, kOuterKv, o);
    }
    at::Tensor current = outer;
    int64_t source = outer_source;
    for (int64_t s = 0; s < inner; ++s) {
      Incoming next;
      if (s + 1 < inner) {
        next = pass_shard(channel, sends, current, plan.rank_at(g, i + 1), plan.rank_at(g, i - 1),
                          plan.rank_at(g - o, i - s - 1), plan, kInnerKv, o * inner + s);
      }
      RingStepEvent event{plan.call, false, o * inner + s, source};
      const auto start = Clock::now();
      event.kept_pairs = step_forward(q, current[0], current[1], plan.shapes_with(source), out_step, lse_step);
      ring_merge_partial(out, lse, out_step, lse_step);
      if (plan.columns) {
        event.kept_pairs += column_step_forward(q, current[0], current[1], plan.geometry->shards[plan.rank()],
                                                plan.geometry->shards[source], *plan.columns, plan.scale, out_step,
                                                lse_step);
        ring_merge_partial(out, lse, out_step, lse_step);
      }
      if (plan.query_blocks) {
        event.kept_pairs += ring_query_block_step_forward(q, current[0], current[1], plan.geometry->shards[source],
                                                          *plan.query_blocks, plan.scale, out_step, lse_step);
        ring_merge_partial(out, lse, out_step, lse_step);
      }
      wait_for_device_work(out.device());
      const auto computed = Clock::now();
      channel.wait(next.pending);
      if (s + 1 == inner) channel.wait(next_outer.pending);  // the next round's shard, overlapped by this inner ring
      if (s + 1 == inner && o + 1 == groups) {
        for (auto& send : sends) channel.wait(send);  // the last step's wait holds the sends' delivery
      }
      record_step(context, event, start, computed);
      if (s + 1 < inner) {
        current = next.tensor;
        source = next.source;
      }
    }
    if (o + 1 < groups) {
      outer = next_outer.tensor;
      outer_source = next_outer.source;
    }
  }
  return {out.to(q.scalar_type()), lse};
}

// Returns dq, dk, dv of this rank's tokens.
std::vector<at::Tensor> ring_backward(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                                      const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                      const RingPlan& plan) {
  RingContext& context = *plan.context;
  RingChannel channel(context, plan.call);
  const int64_t inner = context.inner(), groups = plan.groups(), g = plan.my_group(), i = plan.my_position();
  const bool on_gpu = q.is_cuda();
  // [n, Hq]: rowsum(dO * O) (the GPU kernels compute it from out themselves)
  const at::Tensor delta = on_gpu ? at::Tensor() : (grad_out * out).sum(-1);
  // On a GPU dQ and the travelling dK/dV accumulators are float32: they sum W steps.
  const at::TensorOptions accumulate = on_gpu ? q.options().dtype(at::kFloat) : q.options();
  const auto gradient_pair = [&](int64_t tokens) {
    return at::empty({2, tokens, k.size(1), k.size(2)}, accumulate);
  };
  at::Tensor dq = at::zeros(q.sizes(), accumulate);
  at::Tensor outer = at::stack({k, v}, 0).contiguous();
  int64_t outer_source = plan.rank();
  std::vector<RingChannel::Pending> sends;
  struct {
    RingStepEvent event;
    Clock::time_point start, computed;
  } last_step;  // a round's last step, recorded once the round's waits are over
  // From round 1 on: the earlier groups' dK/dV of the round's shard, finished by the group
  // before and received while the previous round ended; after the last round, this
  // rank's own shard's (home).
  at::Tensor incoming_grad;
  RingChannel::Pending grad_recv;
  for (int64_t o = 0; o < groups; ++o) {
    Incoming next_outer;
    if (o + 1 < groups) {
      next_outer = pass_shard(channel, sends, outer, plan.rank_at(g + 1, i), plan.rank_at(g - 1, i),
                              plan.rank_at(g - o - 1, i), plan, kOuterKvBack, o);
    }
    at::Tensor current = outer;
    int64_t source = outer_source;
    at::Tensor grad = gradient_pair(current.size(1)).zero_();
    for (int64_t s = 0; s < inner; ++s) {
      Incoming next;
      if (s + 1 < inner) {
        next = pass_shard(channel, sends, current, plan.rank_at(g, i + 1), plan.rank_at(g, i - 1),
                          plan.rank_at(g - o, i - s - 1), plan, kInnerKvBack, o * inner + s);
      }
      RingStepEvent event{plan.call, true, o * inner + s, source};
      const auto start = Clock::now();
      at::Tensor dk = grad[0], dv = grad[1];
      const RingShardTiles& mine = plan.geometry->shards[plan.rank()];
      const RingShardTiles& visiting = plan.geometry->shards[source];
#ifdef SB_WITH_CUDA
      if (on_gpu) {
        event.kept_pairs = ring_step_backward_cuda(grad_out, q, current[0], current[1], out, lse,
                                                   plan.shapes_with(source), dq, dk, dv);
        if (plan.columns) {
          event.kept_pairs += ring_column_step_backward_cuda(grad_out, q, current[0], current[1], out, lse, mine,
                                                             visiting, *plan.columns, plan.scale, dq, dk, dv);
        }
      } else
#endif
      {
        event.kept_pairs =
            ring_step_backward(grad_out, q, current[0], current[1], lse, delta, plan.shapes_with(source), dq, dk, dv);
        if (plan.columns) {
          event.kept_pairs += ring_column_step_backward(grad_out, q, current[0], current[1], lse, delta, mine,
                                                        visiting, *plan.columns, plan.scale, dq, dk, dv);
        }
        if (plan.query_blocks) {
          event.kept_pairs += ring_query_block_step_backward(grad_out, q, current[0], current[1], lse, delta, visiting,
                                                             *plan.query_blocks, plan.scale, dq, dk, dv);
        }
      }
      wait_for_device_work(dq.device());
      const auto computed = Clock::now();
      if (inner > 1) {
        // This shard's accumulator moves on with it; the one of the shard arriving comes in
        // (after the last step: this round's outer shard, home in the group).
        Incoming arriving = pass_shard(channel, sends, grad, plan.rank_at(g, i + 1), plan.rank_at(g, i - 1),
                                       plan.rank_at(g - o, i - s - 1), plan, kInnerGrad, o * inner + s);
        channel.wait(arriving.pending);
        grad = arriving.tensor;
      }
      channel.wait(next.pending);
      if (s + 1 < inner) {
        record_step(context, event, start, computed);
        current = next.tensor;
        source = next.source;
      } else {
        last_step = {event, start, computed};  // its wait runs on to the round's end
      }
    }
    if (o > 0) {
      channel.wait(grad_recv);
      grad.add_(incoming_grad);
    }
    if (groups > 1) {
      // This round's accumulator goes on to the next group; the next round's (after the
      // last round: this rank's own) comes in from the group before.
      const int64_t arriving = o + 1 < groups ? next_outer.source : plan.rank();
      incoming_grad = gradient_pair(plan.geometry->shards[arriving].tokens);
      auto [send, receive] =
          channel.exchange(grad, plan.rank_at(g + 1, i), incoming_grad, plan.rank_at(g - 1, i), kOuterGrad, o + 1);
      sends.push_back(std::move(send));
      grad_recv = std::move(receive);
    }
    if (o + 1 < groups) {
      channel.wait(next_outer.pending);
      outer = next_outer.tensor;
      outer_source = next_outer.source;
      record_step(context, last_step.event, last_step.start, last_step.computed);
    } else if (groups == 1) {
      outer = grad;  // one group: the inner ring brought the accumulator home
    }
  }
  at::Tensor home;
  if (groups > 1) {
    channel.wait(grad_recv);
    home = incoming_grad;
  } else {
    home = outer;
  }
  for (auto& send : sends) channel.wait(send);
  // The last step's wait holds the accumulator's way home and the sends' delivery.
  record_step(context, last_step.event, last_step.start, last_step.computed);
  return {dq.to(q.scalar_type()), home[0].to(k.scalar_type()), home[1].to(v.scalar_type())};
}

class RingAttentionFunction : public torch::autograd::Function<RingAttentionFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q,
                                                const at::Tensor& k, const at::Tensor& v,
                                                const c10::intrusive_ptr<RingPlan>& plan) {
    auto [out, lse] = ring_forward(q, k, v, *plan);
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["plan"] = at::IValue::make_capsule(plan);
    ctx->mark_non_differentiable({lse});
    return {out, lse};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto plan = c10::static_intrusive_pointer_cast<RingPlan>(ctx->saved_data["plan"].toCapsule());
    // Every rank runs the backward ring, even one whose output got no gradient, so the
    // ring never waits on a rank that skipped it.
    at::Tensor grad_out = grads[0].defined() ? grads[0].contiguous() : at::zeros_like(saved[3]);
#ifdef SB_WITH_CUDA
    if (grad_out.is_cuda()) grad_out = block_sparse_aligned(grad_out);
#endif
    std::vector<at::Tensor> d = ring_backward(grad_out, saved[0], saved[1], saved[2], saved[3], saved[4], *plan);
    return {d[0], d[1], d[2], at::Tensor()};
  }
};

}  // namespace

void ring_record_step(RingContext& context, RingStepEvent event, Clock::time_point start, Clock::time_point computed) {
  event.start_s = seconds_since_epoch(start);
  event.compute_s = seconds_between(start, computed);
  event.wait_s = seconds_between(computed, Clock::now());
  context.record(event);
}

std::shared_ptr<const RingGeometry> RingGeometry::build(const CpSharding& sharding, int64_t block_size) {
  TORCH_CHECK(block_size >= 1, "ring attention: block_size >= 1 expected");
  auto geometry = std::make_shared<RingGeometry>();
  geometry->cp = sharding.cp();
  geometry->sequences = sharding.sequences();
  const PackedSequences& sequences = sharding.sequences();
  geometry->layout = BlockLayout::build(sequences, sequences, block_size, /*causal=*/true);
  for (int64_t r = 0; r < sharding.cp(); ++r) {
    geometry->shards.push_back(RingShardTiles::build(sharding.tokens_of(r), geometry->layout));
  }
  return geometry;
}

const RingBlockPattern& RingGeometry::causal_pattern() const {
  std::call_once(causal_once_, [this] { causal_ = RingBlockPattern::causal(layout); });
  return causal_;
}

RingAttentionResult ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const CpSharding& sharding, RingPatternSelector& selector,
                                   const AttentionBudgetRequest& request, double scale,
                                   const std::shared_ptr<RingContext>& context) {
  return ring_attention(q, k, v, RingGeometry::build(sharding, selector.block_size()), selector, request, scale,
                        /*layer=*/0, context);
}

RingAttentionResult ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const std::shared_ptr<const RingGeometry>& geometry, RingPatternSelector& selector,
                                   const AttentionBudgetRequest& request, double scale, int64_t layer,
                                   const std::shared_ptr<RingContext>& context,
                                   const std::function<void(std::vector<double>&)>& head_shard_sum) {
  TORCH_CHECK(k.device() == q.device() && v.device() == q.device() && k.scalar_type() == q.scalar_type() &&
                  v.scalar_type() == q.scalar_type(),
              "ring attention: q, k and v must share one device and dtype, got ", q.device(), " ", q.scalar_type(),
              ", ", k.device(), " ", k.scalar_type(), ", ", v.device(), " ", v.scalar_type());
  if (q.is_cuda()) {
#ifdef SB_WITH_CUDA
    TORCH_CHECK(block_sparse_cuda_supports(q.scalar_type(), q.size(2)),
                "ring attention on a GPU runs the fused block-sparse kernels: bfloat16 or float16 with head_dim 64 "
                "or 128, got ", q.scalar_type(), " with head_dim ", q.size(2));
#else
    TORCH_CHECK(false, "ring attention: q is on ", q.device(), " but this build has no CUDA kernels");
#endif
  } else {
    TORCH_CHECK(q.device().is_cpu(), "ring attention runs on the CPU or a CUDA GPU, got ", q.device());
  }
  TORCH_CHECK(geometry->cp == context->size(), "ring attention: the sharding has ", geometry->cp,
              " ranks, the CP group ", context->size());
  TORCH_CHECK(scale > 0.0 && selector.block_size() == geometry->layout.block_size,
              "ring attention: scale > 0 and the geometry's block size expected (", selector.name(), " selects blocks of ",
              selector.block_size(), ", the geometry has ", geometry->layout.block_size, ")");
  auto plan = c10::make_intrusive<RingPlan>();
  plan->context = context;
  plan->geometry = geometry;
  plan->scale = scale;
  plan->call = context->next_call();
  RingCallPattern selected =
      selector.select(RingSelectionInputs{q, k, *geometry, request, scale, layer, *context, plan->call, head_shard_sum});
  plan->pattern = std::move(selected.blocks);
  plan->columns = std::move(selected.columns);
  plan->query_blocks = std::move(selected.query_blocks);
  TORCH_CHECK(!q.is_cuda() || plan->pattern.band_window.empty(), "ring attention: ", selector.name(),
              "'s band (keys cut inside a block) runs on the CPU ring only; the GPU ring's fused kernels mask whole "
              "blocks and the causal diagonal");
  TORCH_CHECK(!q.is_cuda() || !plan->query_blocks, "ring attention: ", selector.name(),
              "'s key blocks chosen per query (MoBA's token gate) run on the CPU ring only so far");
  at::Tensor q_in = q.contiguous(), k_in = k.contiguous(), v_in = v.contiguous();
#ifdef SB_WITH_CUDA
  if (q.is_cuda()) {  // the kernels read rows with 16-byte loads
    q_in = block_sparse_aligned(q_in);
    k_in = block_sparse_aligned(k_in);
    v_in = block_sparse_aligned(v_in);
  }
#endif
  auto outputs = RingAttentionFunction::apply(q_in, k_in, v_in, plan);
  RingAttentionResult result;
  result.out = outputs[0];
  result.lse = outputs[1];
  result.blocks = plan->pattern;
  result.stats = std::move(selected.stats);
  return result;
}

}  // namespace sb
