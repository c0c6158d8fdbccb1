#include "harness/sim/pipeline_simulator.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include "harness/parallel/pipeline/pipeline_schedule.h"

namespace sb {
namespace {

void check_shapes(const PipelineSimInput& in) {
  const auto fail = [](const std::string& what) {
    throw std::invalid_argument("simulate_pipeline_iteration: " + what);
  };
  if (in.dp < 1 || in.pp < 1) fail("dp and pp must be >= 1");
  const auto d = static_cast<size_t>(in.dp);
  const auto p = static_cast<size_t>(in.pp);
  if (in.start_ms.size() != d || in.forward_ms.size() != d || in.backward_ms.size() != d ||
      in.transfer_ms.size() != d) {
    fail("start_ms, forward_ms, backward_ms and transfer_ms need one entry per DP rank");
  }
  if (in.allreduce_ms.size() != p || in.optimizer_ms.size() != p) fail("allreduce_ms and optimizer_ms need pp entries");
  for (size_t r = 0; r < d; ++r) {
    if (in.forward_ms[r].size() != p || in.backward_ms[r].size() != p || in.transfer_ms[r].size() != p) {
      fail("every DP rank needs pp stages of durations");
    }
    const size_t m = in.forward_ms[r][0].size();
    for (size_t s = 0; s < p; ++s) {
      if (in.forward_ms[r][s].size() != m || in.backward_ms[r][s].size() != m ||
          (s + 1 < p && in.transfer_ms[r][s].size() != m)) {
        fail("every stage of a pipeline needs the same micro-batch count");
      }
    }
  }
}

// Messages of one link direction, indexed by micro-batch.
struct Direction {
  std::vector<double> send_posted;  // < 0: not yet
  std::vector<double> delivered;    // < 0: not yet
  double free_at = 0;
};

struct StageState {
  std::vector<PipelineStep> steps;
  size_t next = 0;
  double clock = 0;
  bool sends_posted = false;  // of steps[next]
};

}  // namespace

PipelineSimResult simulate_pipeline_iteration(const PipelineSimInput& in) {
  check_shapes(in);
  PipelineSimResult result;
  result.ranks.resize(static_cast<size_t>(in.dp * in.pp));
  std::vector<std::vector<double>> ready(static_cast<size_t>(in.dp), std::vector<double>(static_cast<size_t>(in.pp)));

  for (int64_t d = 0; d < in.dp; ++d) {
    const auto du = static_cast<size_t>(d);
    const int64_t m = static_cast<int64_t>(in.forward_ms[du][0].size());
    // [s][0]: activations s -> s + 1; [s][1]: gradients s + 1 -> s.
    std::vector<std::array<Direction, 2>> links(static_cast<size_t>(in.pp));
    for (auto& link : links) {
      for (Direction& dir : link) {
        dir.send_posted.assign(static_cast<size_t>(m), -1.0);
        dir.delivered.assign(static_cast<size_t>(m), -1.0);
      }
    }
    std::vector<StageState> stages(static_cast<size_t>(in.pp));
    for (int64_t s = 0; s < in.pp; ++s) {
      StageState& st = stages[static_cast<size_t>(s)];
      st.steps = one_f_one_b_schedule(s, in.pp, m);
      st.clock = in.start_ms[du];
      RankTimeline& t = result.ranks[static_cast<size_t>(d * in.pp + s)];
      t.rank = d * in.pp + s;
      t.dp_rank = d;
      t.stage = s;
      t.start_ms = 0;
      if (in.start_ms[du] > 0) t.events.push_back({EventKind::kPlan, -1, 0, in.start_ms[du]});
    }
    // The link direction and its stage index of a comm op of `stage`.
    const auto direction_of = [&](int64_t stage, CommKind kind) -> Direction& {
      switch (kind) {
        case CommKind::kSendActivation: return links[static_cast<size_t>(stage)][0];
        case CommKind::kRecvActivation: return links[static_cast<size_t>(stage - 1)][0];
        case CommKind::kSendGradient: return links[static_cast<size_t>(stage - 1)][1];
        case CommKind::kRecvGradient: return links[static_cast<size_t>(stage)][1];
      }
      throw std::logic_error("simulate_pipeline_iteration: unknown CommKind");
    };
    const auto link_index = [](int64_t stage, CommKind kind) {
      return kind == CommKind::kSendActivation || kind == CommKind::kRecvGradient ? stage : stage - 1;
    };

    // Advance every stage as far as it can go until all are done; the schedule is
    // deadlock-free, so each sweep moves at least one stage.
    bool done = false;
    while (!done) {
      done = true;
      bool moved = false;
      for (int64_t s = 0; s < in.pp; ++s) {
        StageState& st = stages[static_cast<size_t>(s)];
        RankTimeline& t = result.ranks[static_cast<size_t>(d * in.pp + s)];
        while (st.next < st.steps.size()) {
          const PipelineStep& step = st.steps[st.next];
          if (step.kind != StepKind::kExchange) {
            const auto mb = static_cast<size_t>(step.microbatch);
            const bool fwd = step.kind == StepKind::kForward;
            const double dur = fwd ? in.forward_ms[du][static_cast<size_t>(s)][mb] : in.backward_ms[du][static_cast<size_t>(s)][mb];
            t.events.push_back({fwd ? EventKind::kForward : EventKind::kBackward, step.microbatch, st.clock, st.clock + dur});
            st.clock += dur;
            ++st.next;
            moved = true;
            continue;
          }
          if (!st.sends_posted) {
            for (const CommOp& op : step.ops) {
              if (op.kind == CommKind::kSendActivation || op.kind == CommKind::kSendGradient) {
                direction_of(s, op.kind).send_posted[static_cast<size_t>(op.microbatch)] = st.clock;
              }
            }
            st.sends_posted = true;
            moved = true;
          }
          bool blocked = false;
          for (const CommOp& op : step.ops) {
            if (op.kind != CommKind::kRecvActivation && op.kind != CommKind::kRecvGradient) continue;
            if (direction_of(s, op.kind).send_posted[static_cast<size_t>(op.microbatch)] < 0) blocked = true;
          }
          if (blocked) break;
          double arrival = st.clock;
          int64_t waited_mb = -1;
          for (const CommOp& op : step.ops) {
            if (op.kind != CommKind::kRecvActivation && op.kind != CommKind::kRecvGradient) continue;
            Direction& dir = direction_of(s, op.kind);
            const auto mb = static_cast<size_t>(op.microbatch);
            const double begin = std::max({dir.send_posted[mb], st.clock, dir.free_at});
            const double end = begin + in.transfer_ms[du][static_cast<size_t>(link_index(s, op.kind))][mb];
            dir.delivered[mb] = end;
            dir.free_at = end;
            if (end > arrival) {
              arrival = end;
              waited_mb = op.microbatch;
            }
          }
          if (arrival > st.clock) t.events.push_back({EventKind::kRecvWait, waited_mb, st.clock, arrival});
          st.clock = arrival;
          st.sends_posted = false;
          ++st.next;
          moved = true;
        }
        if (st.next < st.steps.size()) done = false;
      }
      if (!done && !moved) throw std::logic_error("simulate_pipeline_iteration: the schedule deadlocked");
    }
    // Send completion: every send was delivered once its receiver resolved it.
    for (int64_t s = 0; s < in.pp; ++s) {
      StageState& st = stages[static_cast<size_t>(s)];
      double last = st.clock;
      for (const PipelineStep& step : st.steps) {
        for (const CommOp& op : step.ops) {
          if (op.kind == CommKind::kSendActivation || op.kind == CommKind::kSendGradient) {
            last = std::max(last, direction_of(s, op.kind).delivered[static_cast<size_t>(op.microbatch)]);
          }
        }
      }
      RankTimeline& t = result.ranks[static_cast<size_t>(d * in.pp + s)];
      if (last > st.clock) t.events.push_back({EventKind::kSendWait, -1, st.clock, last});
      ready[du][static_cast<size_t>(s)] = last;
    }
  }

  for (int64_t s = 0; s < in.pp; ++s) {
    double start = 0;
    for (int64_t d = 0; d < in.dp; ++d) start = std::max(start, ready[static_cast<size_t>(d)][static_cast<size_t>(s)]);
    const double reduced = start + in.allreduce_ms[static_cast<size_t>(s)];
    for (int64_t d = 0; d < in.dp; ++d) {
      RankTimeline& t = result.ranks[static_cast<size_t>(d * in.pp + s)];
      const double from = ready[static_cast<size_t>(d)][static_cast<size_t>(s)];
      if (in.dp > 1 || in.allreduce_ms[static_cast<size_t>(s)] > 0) {
        t.events.push_back({EventKind::kAllReduce, -1, from, reduced});
        result.max_allreduce_ms = std::max(result.max_allreduce_ms, reduced - from);
      }
      const double end = reduced + in.optimizer_ms[static_cast<size_t>(s)];
      t.events.push_back({EventKind::kOptimizer, -1, reduced, end});
      t.end_ms = end;
    }
  }
  if (in.exchange_ms > 0) {
    double last = 0;
    for (const RankTimeline& t : result.ranks) last = std::max(last, t.end_ms);
    const double exchanged = last + in.exchange_ms;
    for (RankTimeline& t : result.ranks) {
      t.events.push_back({EventKind::kPlanExchange, -1, t.end_ms, exchanged});
      t.end_ms = exchanged;
    }
  }
  return result;
}

}  // namespace sb
