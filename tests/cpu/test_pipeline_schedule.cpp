// The 1F1B schedule, checked without running anything: for 1..9 micro-batches and
// 1..4 stages, every stage runs each micro-batch's forward then its backward exactly
// once, in 1F1B order with bounded in-flight activations; every send has exactly one
// matching receive on the neighbouring stage; and a simulation of all stages together
// finishes (no deadlock) both when sends are buffered (Gloo: a send returns at once)
// and when a send completes only once its receive is posted (NCCL). A timed
// simulation with uniform forward/backward times reproduces the textbook makespan
// (m + p - 1)(F + B).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "harness/parallel/pipeline/pipeline_schedule.h"

namespace sb {
namespace {

using Schedules = std::vector<std::vector<PipelineStep>>;

Schedules all_stages(int64_t stages, int64_t microbatches) {
  Schedules s;
  for (int64_t stage = 0; stage < stages; ++stage) {
    s.push_back(one_f_one_b_schedule(stage, stages, microbatches));
  }
  return s;
}

// (stage, kind, micro-batch) -> index of the exchange step that holds it.
std::map<std::tuple<int64_t, CommKind, int64_t>, size_t> index_ops(const Schedules& schedules) {
  std::map<std::tuple<int64_t, CommKind, int64_t>, size_t> where;
  for (size_t s = 0; s < schedules.size(); ++s) {
    for (size_t i = 0; i < schedules[s].size(); ++i) {
      for (const CommOp& op : schedules[s][i].ops) {
        auto key = std::make_tuple(static_cast<int64_t>(s), op.kind, op.microbatch);
        EXPECT_EQ(where.count(key), 0u) << "stage " << s << " posts " << comm_kind_name(op.kind)
                                        << " " << op.microbatch << " twice";
        where[key] = i;
      }
    }
  }
  return where;
}

enum class SendSemantics { kBuffered, kRendezvous };

// Steps every stage as far as the semantics allow; returns the final positions.
std::vector<size_t> simulate(const Schedules& schedules, SendSemantics semantics) {
  const auto where = index_ops(schedules);
  std::vector<size_t> pos(schedules.size(), 0);
  auto satisfied = [&](int64_t stage, const CommOp& op) {
    const bool is_send = op.kind == CommKind::kSendActivation || op.kind == CommKind::kSendGradient;
    if (is_send && semantics == SendSemantics::kBuffered) return true;
    const int64_t peer = comm_peer_stage(stage, op.kind);
    const size_t peer_step = where.at({peer, comm_counterpart(op.kind), op.microbatch});
    return pos[static_cast<size_t>(peer)] >= peer_step;  // the peer has posted its side
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (size_t s = 0; s < schedules.size(); ++s) {
      while (pos[s] < schedules[s].size()) {
        const PipelineStep& step = schedules[s][pos[s]];
        bool ready = true;
        for (const CommOp& op : step.ops) ready = ready && satisfied(static_cast<int64_t>(s), op);
        if (!ready) break;
        ++pos[s];
        progress = true;
      }
    }
  }
  return pos;
}

TEST(OneFOneBSchedule, EveryMicroBatchForwardThenBackwardOnceInOneFOneBOrder) {
  for (int64_t p = 1; p <= 4; ++p) {
    for (int64_t m = 1; m <= 9; ++m) {
      for (int64_t s = 0; s < p; ++s) {
        SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) + " stage " + std::to_string(s));
        std::vector<int> forwards(m, 0), backwards(m, 0);
        std::vector<std::pair<StepKind, int64_t>> compute;
        int64_t in_flight = 0, max_in_flight = 0;
        for (const PipelineStep& step : one_f_one_b_schedule(s, p, m)) {
          if (step.kind == StepKind::kForward) {
            ++forwards[step.microbatch];
            max_in_flight = std::max(max_in_flight, ++in_flight);
            compute.emplace_back(step.kind, step.microbatch);
          } else if (step.kind == StepKind::kBackward) {
            EXPECT_EQ(forwards[step.microbatch], 1) << "backward before forward of " << step.microbatch;
            ++backwards[step.microbatch];
            --in_flight;
            compute.emplace_back(step.kind, step.microbatch);
          } else {
            EXPECT_FALSE(step.ops.empty());
          }
        }
        for (int64_t mb = 0; mb < m; ++mb) {
          EXPECT_EQ(forwards[mb], 1) << mb;
          EXPECT_EQ(backwards[mb], 1) << mb;
        }
        // Warm-up: p - s - 1 forwards (or m); then forwards and backwards alternate
        // while forwards remain; then the remaining backwards. Both in mb order.
        const int64_t warmup = std::min(p - s - 1, m);
        ASSERT_EQ(static_cast<int64_t>(compute.size()), 2 * m);
        int64_t next_f = 0, next_b = 0;
        for (size_t i = 0; i < compute.size(); ++i) {
          const auto [kind, mb] = compute[i];
          const auto idx = static_cast<int64_t>(i);
          StepKind expected;
          if (idx < warmup) {
            expected = StepKind::kForward;
          } else if (next_f < m) {
            expected = (idx - warmup) % 2 == 0 ? StepKind::kForward : StepKind::kBackward;
          } else {
            expected = StepKind::kBackward;
          }
          EXPECT_EQ(kind, expected) << "compute step " << i;
          EXPECT_EQ(mb, kind == StepKind::kForward ? next_f++ : next_b++) << "compute step " << i;
        }
        EXPECT_EQ(max_in_flight, std::min(p - s, m));
      }
    }
  }
}

TEST(OneFOneBSchedule, EverySendHasOneMatchingReceiveOnTheNeighbour) {
  for (int64_t p = 1; p <= 4; ++p) {
    for (int64_t m = 1; m <= 9; ++m) {
      const Schedules schedules = all_stages(p, m);
      const auto where = index_ops(schedules);
      size_t ops = 0;
      for (const auto& [key, step] : where) {
        const auto [stage, kind, mb] = key;
        const int64_t peer = comm_peer_stage(stage, kind);
        ASSERT_GE(peer, 0);
        ASSERT_LT(peer, p);
        EXPECT_EQ(where.count({peer, comm_counterpart(kind), mb}), 1u)
            << "p=" << p << " m=" << m << " stage " << stage << " " << comm_kind_name(kind) << " " << mb;
        ++ops;
      }
      // Each of the p - 1 links carries m activations and m gradients, two ends each.
      EXPECT_EQ(ops, static_cast<size_t>(4 * m * (p - 1)));
    }
  }
}

TEST(OneFOneBSchedule, AllStagesFinishWithBufferedAndWithRendezvousSends) {
  for (SendSemantics semantics : {SendSemantics::kBuffered, SendSemantics::kRendezvous}) {
    for (int64_t p = 1; p <= 4; ++p) {
      for (int64_t m = 1; m <= 9; ++m) {
        const Schedules schedules = all_stages(p, m);
        const std::vector<size_t> pos = simulate(schedules, semantics);
        for (size_t s = 0; s < schedules.size(); ++s) {
          EXPECT_EQ(pos[s], schedules[s].size())
              << (semantics == SendSemantics::kBuffered ? "buffered" : "rendezvous") << " p=" << p
              << " m=" << m << ": stage " << s << " stuck at "
              << (pos[s] < schedules[s].size() ? describe_step(schedules[s][pos[s]]) : "end");
        }
      }
    }
  }
}

PipelineStep exchange(CommKind kind) { return PipelineStep{StepKind::kExchange, -1, {{kind, 0}}}; }

TEST(OneFOneBSchedule, TheSimulatorDetectsDeadlocks) {
  // The simulator must be able to say "stuck", or the test above proves nothing.
  // Both stages receive first: stuck under either semantics.
  const Schedules receive_first = {
      {exchange(CommKind::kRecvGradient), exchange(CommKind::kSendActivation)},
      {exchange(CommKind::kRecvActivation), exchange(CommKind::kSendGradient)}};
  for (SendSemantics semantics : {SendSemantics::kBuffered, SendSemantics::kRendezvous}) {
    EXPECT_EQ(simulate(receive_first, semantics), (std::vector<size_t>{0, 0}));
  }
  // Both stages send first: fine when sends are buffered, stuck when a send waits for
  // its receive.
  const Schedules send_first = {
      {exchange(CommKind::kSendActivation), exchange(CommKind::kRecvGradient)},
      {exchange(CommKind::kSendGradient), exchange(CommKind::kRecvActivation)}};
  EXPECT_EQ(simulate(send_first, SendSemantics::kBuffered), (std::vector<size_t>{2, 2}));
  EXPECT_EQ(simulate(send_first, SendSemantics::kRendezvous), (std::vector<size_t>{0, 0}));
}

// Timed run with buffered sends: a step starts when the previous step of its stage
// ended; an exchange with a receive ends once the sender has posted the matching send
// (the start of the sender's exchange step). Communication takes no time.
double simulated_makespan(int64_t p, int64_t m, double forward, double backward) {
  const Schedules schedules = all_stages(p, m);
  const auto where = index_ops(schedules);
  std::vector<std::vector<double>> end(p);  // end time of each step, -1 = not yet
  for (int64_t s = 0; s < p; ++s) end[s].assign(schedules[s].size(), -1.0);
  auto start_of = [&](int64_t s, size_t i) { return i == 0 ? 0.0 : end[s][i - 1]; };
  bool progress = true;
  while (progress) {
    progress = false;
    for (int64_t s = 0; s < p; ++s) {
      for (size_t i = 0; i < schedules[s].size(); ++i) {
        if (end[s][i] >= 0) continue;
        double finish = start_of(s, i);
        if (finish < 0) break;
        bool ready = true;
        for (const CommOp& op : schedules[s][i].ops) {
          if (op.kind == CommKind::kSendActivation || op.kind == CommKind::kSendGradient) continue;
          const int64_t peer = comm_peer_stage(s, op.kind);
          const double posted = start_of(peer, where.at({peer, comm_counterpart(op.kind), op.microbatch}));
          if (posted < 0) ready = false;
          finish = std::max(finish, posted);
        }
        if (!ready) break;
        const StepKind kind = schedules[s][i].kind;
        end[s][i] = finish + (kind == StepKind::kForward ? forward : kind == StepKind::kBackward ? backward : 0.0);
        progress = true;
      }
    }
  }
  double makespan = 0;
  for (int64_t s = 0; s < p; ++s) {
    EXPECT_GE(end[s].back(), 0) << "stage " << s << " did not finish";
    makespan = std::max(makespan, end[s].back());
  }
  return makespan;
}

TEST(OneFOneBSchedule, UniformStagesTakeTheTextbookMakespan) {
  for (int64_t p = 1; p <= 4; ++p) {
    for (int64_t m = 1; m <= 9; ++m) {
      EXPECT_DOUBLE_EQ(simulated_makespan(p, m, 1.0, 2.0), (m + p - 1) * 3.0) << "p=" << p << " m=" << m;
    }
  }
}

TEST(OneFOneBSchedule, ZeroMicroBatchesIsAnEmptyScheduleAndBadArgumentsThrow) {
  EXPECT_TRUE(one_f_one_b_schedule(1, 3, 0).empty());
  EXPECT_THROW(one_f_one_b_schedule(3, 3, 1), std::invalid_argument);
  EXPECT_THROW(one_f_one_b_schedule(0, 0, 1), std::invalid_argument);
  EXPECT_THROW(one_f_one_b_schedule(0, 1, -1), std::invalid_argument);
}

}  // namespace
}  // namespace sb
