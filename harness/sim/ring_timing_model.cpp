#include "harness/sim/ring_timing_model.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace sb {
namespace {

// The ring's numbering (ring_timing_model.h): CP rank r = group x inner + position.
class RingOrder {
 public:
  RingOrder(int64_t cp, int64_t inner) : inner_(inner), groups_(cp / inner) {}
  int64_t groups() const { return groups_; }
  int64_t inner() const { return inner_; }
  int64_t rank_at(int64_t group, int64_t position) const {
    return ((group % groups_ + groups_) % groups_) * inner_ + ((position % inner_ + inner_) % inner_);
  }
  // The shard rank r computes against at round o, inner step s.
  int64_t source(int64_t r, int64_t o, int64_t s) const { return rank_at(r / inner_ - o, r % inner_ - s); }
  int64_t previous_inner(int64_t r) const { return rank_at(r / inner_, r % inner_ - 1); }
  int64_t previous_outer(int64_t r) const { return rank_at(r / inner_ - 1, r % inner_); }

 private:
  int64_t inner_, groups_;
};

// One layer's ring on every rank: enter[r] when rank r reaches it, updated to when it
// leaves (its last compute done, its messages received and its sends delivered).
class LayerRing {
 public:
  LayerRing(const RingTimingInput& in, const RingOrder& order, RingTiming& out)
      : in_(in), order_(order), out_(out), W_(static_cast<size_t>(in.cp)) {}

  void forward(std::vector<double>& enter) { run(enter, false); }
  void backward(std::vector<double>& enter) { run(enter, true); }

 private:
  // A message from `from` to `to` carrying the shard (or accumulator) of `shard`, posted
  // by the sender at `sent` and by the receiver at `posted`: its arrival.
  double deliver(int64_t from, int64_t to, int64_t shard, double sent, double posted) {
    const double arrival =
        std::max(sent, posted) + in_.transfer_ms(from, to, in_.shard_bytes[static_cast<size_t>(shard)]);
    double& done = sends_done_[static_cast<size_t>(from)];
    done = std::max(done, arrival);
    return arrival;
  }

  void run(std::vector<double>& enter, bool backward) {
    const int64_t groups = order_.groups(), inner = order_.inner();
    const auto& step_ms = backward ? in_.backward_step_ms : in_.forward_step_ms;
    sends_done_.assign(W_, 0.0);
    std::vector<double> round_start = enter, now(W_), computed(W_), outer_kv(W_), outer_grad(W_), grad_sent(W_);
    std::vector<double> inner_kv(W_), grad_in(W_);
    for (int64_t o = 0; o < groups; ++o) {
      for (size_t r = 0; r < W_; ++r) {
        const auto ri = static_cast<int64_t>(r);
        const int64_t p = order_.previous_outer(ri);
        if (o + 1 < groups) {
          outer_kv[r] = deliver(p, ri, order_.source(p, o, 0), round_start[static_cast<size_t>(p)], round_start[r]);
        }
        if (backward && o > 0) {
          outer_grad[r] = deliver(p, ri, order_.source(ri, o, 0), grad_sent[static_cast<size_t>(p)], round_start[r]);
        }
      }
      now = round_start;
      for (int64_t s = 0; s < inner; ++s) {
        for (size_t r = 0; r < W_; ++r) {
          const double c = step_ms[r][static_cast<size_t>(order_.source(static_cast<int64_t>(r), o, s))];
          computed[r] = now[r] + c;
          out_.attention_ms[r] += c;
        }
        for (size_t r = 0; r < W_; ++r) {
          const auto ri = static_cast<int64_t>(r);
          const int64_t p = order_.previous_inner(ri);
          const auto pi = static_cast<size_t>(p);
          if (s + 1 < inner) inner_kv[r] = deliver(p, ri, order_.source(p, o, s), now[pi], now[r]);
          if (backward && inner > 1) grad_in[r] = deliver(p, ri, order_.source(p, o, s), computed[pi], computed[r]);
        }
        for (size_t r = 0; r < W_; ++r) {
          double end = backward && inner > 1 ? grad_in[r] : computed[r];
          if (s + 1 < inner) end = std::max(end, inner_kv[r]);
          if (!backward && s + 1 == inner && o + 1 < groups) end = std::max(end, outer_kv[r]);
          out_.wait_ms[r] += end - computed[r];
          now[r] = end;
        }
      }
      for (size_t r = 0; r < W_; ++r) {
        double end = now[r];
        if (backward && o > 0) end = std::max(end, outer_grad[r]);
        if (backward && o + 1 < groups) {
          grad_sent[r] = end;
          end = std::max(end, outer_kv[r]);
        } else if (backward) {
          grad_sent[r] = end;
        }
        out_.wait_ms[r] += end - now[r];
        round_start[r] = end;
      }
    }
    std::vector<double> leave = round_start;
    if (backward && groups > 1) {  // the accumulator comes home from the group before
      for (size_t r = 0; r < W_; ++r) {
        const int64_t p = order_.previous_outer(static_cast<int64_t>(r));
        leave[r] = deliver(p, static_cast<int64_t>(r), static_cast<int64_t>(r), grad_sent[static_cast<size_t>(p)],
                           round_start[r]);
      }
    }
    for (size_t r = 0; r < W_; ++r) {
      const double end = std::max(leave[r], sends_done_[r]);
      out_.wait_ms[r] += end - round_start[r];
      enter[r] = end;
    }
  }

  const RingTimingInput& in_;
  const RingOrder& order_;
  RingTiming& out_;
  size_t W_;
  std::vector<double> sends_done_;
};

void check_sizes(const RingTimingInput& in) {
  const auto W = static_cast<size_t>(in.cp);
  auto fail = [&](const std::string& what) {
    throw std::invalid_argument("simulate_ring_microbatch: " + what + " (cp " + std::to_string(in.cp) + ", inner " +
                                std::to_string(in.inner) + ")");
  };
  if (in.cp < 1 || in.inner < 1 || in.cp % in.inner != 0) fail("cp must be a positive multiple of inner");
  if (in.layers < 0) fail("layers must be >= 0");
  for (const auto* m : {&in.forward_step_ms, &in.backward_step_ms}) {
    if (m->size() != W) fail("step matrices need cp rows");
    for (const auto& row : *m) {
      if (row.size() != W) fail("step matrices need cp columns");
    }
  }
  for (const auto* v : {&in.forward_rest_ms, &in.backward_rest_ms, &in.forward_outside_ms, &in.backward_outside_ms,
                        &in.shard_bytes}) {
    if (v->size() != W) fail("per-rank vectors need cp entries");
  }
  for (const auto* v : {&in.forward_head_ms, &in.backward_head_ms}) {
    if (!v->empty() && v->size() != W) fail("head vectors need cp entries or none");
  }
  if (!in.transfer_ms) fail("transfer_ms is not set");
}

}  // namespace

RingTiming simulate_ring_microbatch(const RingTimingInput& in) {
  check_sizes(in);
  const auto W = static_cast<size_t>(in.cp);
  RingTiming out;
  out.attention_ms.assign(W, 0.0);
  out.wait_ms.assign(W, 0.0);
  const RingOrder order(in.cp, in.inner);
  LayerRing ring(in, order, out);

  std::vector<double> t = in.forward_outside_ms;
  for (int64_t layer = 0; layer < in.layers; ++layer) {
    for (size_t r = 0; r < W; ++r) t[r] += in.forward_rest_ms[r];
    if (in.layer_sync_ms > 0) {  // a collective: everyone leaves together
      const double leave = *std::max_element(t.begin(), t.end()) + in.layer_sync_ms;
      for (size_t r = 0; r < W; ++r) {
        out.wait_ms[r] += leave - in.layer_sync_ms - t[r];
        t[r] = leave;
      }
    }
    ring.forward(t);
  }
  for (size_t r = 0; r < in.forward_head_ms.size(); ++r) t[r] += in.forward_head_ms[r];
  out.forward_ms = *std::max_element(t.begin(), t.end());

  t.assign(W, 0.0);
  for (size_t r = 0; r < in.backward_head_ms.size(); ++r) t[r] += in.backward_head_ms[r];
  for (int64_t layer = 0; layer < in.layers; ++layer) {
    for (size_t r = 0; r < W; ++r) t[r] += in.backward_rest_ms[r];
    ring.backward(t);
  }
  for (size_t r = 0; r < W; ++r) t[r] += in.backward_outside_ms[r];
  out.backward_ms = *std::max_element(t.begin(), t.end());
  return out;
}

}  // namespace sb
