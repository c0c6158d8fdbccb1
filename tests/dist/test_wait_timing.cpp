// Every timed interval means one thing on every backend (docs/metrics.md, "What each
// interval holds"): a slow peer's delay shows up as wait, never as compute, even when
// the process group's wait() does not block the host, as NCCL's does not. The ranks here
// are sb_wait_timing_worker processes whose data groups complete like NCCL's on the
// CPU (tests/support/deferred_completion_backend.h); one rank sleeps kDelay before
// posting each call of one kind. Checked for pipeline receives, the data-parallel
// gradient all-reduce, the context-parallel ring and the tensor-parallel collectives:
// the waiting rank's wait intervals hold at least 80 % of the delay and its compute
// intervals (forward, backward, ring steps, the forward less its TP collectives) under
// half of it. This tiny model's compute takes a few milliseconds. The pipeline and the
// ring run both ways: posted one by one (Gloo's path) and grouped (NCCL's coalesced
// path, one work for each exchange with its sends).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "harness/records/iteration_record.h"
#include "harness/trace/timeline.h"
#include "tests/support/free_tcp_port.h"
#include "tests/support/run_command.h"
#include "tests/support/worker_processes.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr double kDelayMs = 300;
constexpr double kWaitShare = 0.8;     // a wait holds at least this share of the delay
constexpr double kComputeShare = 0.5;  // a compute interval stays under this share

struct Layout {
  int64_t dp = 1, pp = 1, cp = 1, tp = 1;
  int64_t world() const { return dp * pp * cp * tp; }
};

struct Outcome {
  std::vector<TimelineIteration> timelines;
  std::vector<IterationRecord> records;
};

json manifest_for(const std::string& name, const Layout& layout, int64_t iterations) {
  json j = json::parse(R"({
    "seed": 5,
    "model": {"preset": "qwen2-test"},
    "data": {"synthetic": {"length_mixture": [{"min_tokens": 24, "max_tokens": 40}]}},
    "train": {"warmup_iterations": 0, "global_batch_size": 4,
              "max_tokens_per_microbatch": 48, "lr": 0.01, "lr_warmup_fraction": 0},
    "methods": [{"name": "dense"}]
  })");
  j["name"] = name;
  j["train"]["iterations"] = iterations;
  j["parallelism"] = {{"dp", layout.dp}, {"pp", layout.pp}, {"cp", layout.cp}, {"tp", layout.tp}, {"timeout_s", 60}};
  return j;
}

// Runs every rank with `slow_rank` delaying each call of `ops`; rank 0's files.
Outcome run_job(const std::string& name, const Layout& layout, int slow_rank, const std::string& ops,
                int64_t iterations, bool coalesce = false) {
  const fs::path dir = test::fresh_temp_dir("wait_timing_" + name);
  const fs::path manifest = dir / "manifest.json";
  std::ofstream(manifest) << manifest_for(name, layout, iterations).dump(2);
  const int world = static_cast<int>(layout.world());
  const int port = test::free_tcp_port();
  std::vector<test::Worker> workers;
  for (int rank = 0; rank < world; ++rank) {
    std::map<std::string, std::string> env = test::rank_env(rank, world, port);
    env["SB_TEST_DELAY_RANK"] = std::to_string(slow_rank);
    env["SB_TEST_DELAY_MS"] = std::to_string(static_cast<int>(kDelayMs));
    env["SB_TEST_DELAY_OPS"] = ops;
    env["SB_TEST_COALESCE"] = coalesce ? "1" : "0";
    workers.push_back(test::spawn_worker({SB_BINARY_DIR "/tests/sb_wait_timing_worker", manifest.string(), dir.string()},
                                         env, dir / ("rank" + std::to_string(rank) + ".log")));
  }
  const auto deadline = Clock::now() + std::chrono::seconds(240);
  Outcome outcome;
  for (int rank = 0; rank < world; ++rank) {
    const int code = test::wait_worker(workers[static_cast<size_t>(rank)], deadline);
    EXPECT_EQ(code, 0) << name << " rank " << rank << ":\n" << test::slurp(workers[static_cast<size_t>(rank)].log);
    if (code != 0) return outcome;
  }
  outcome.timelines = read_timeline_events(dir / "timeline.jsonl");
  std::ifstream records(dir / "records.jsonl");
  for (std::string line; std::getline(records, line);) {
    outcome.records.push_back(iteration_record_from_json(json::parse(line)));
  }
  EXPECT_EQ(static_cast<int64_t>(outcome.timelines.size()), iterations);
  EXPECT_EQ(static_cast<int64_t>(outcome.records.size()), iterations);
  fs::remove_all(dir);
  return outcome;
}

std::vector<TimelineEvent> events_of(const RankTimeline& rank, EventKind kind, int64_t microbatch = -2) {
  std::vector<TimelineEvent> found;
  for (const TimelineEvent& e : rank.events) {
    if (e.kind == kind && (microbatch == -2 || e.microbatch == microbatch)) found.push_back(e);
  }
  return found;
}

double total_ms(const std::vector<TimelineEvent>& events) {
  double sum = 0;
  for (const TimelineEvent& e : events) sum += e.duration_ms();
  return sum;
}

// Every forward and backward of every rank is compute only.
void expect_compute_without_the_delay(const Outcome& o) {
  for (const TimelineIteration& it : o.timelines) {
    for (const RankTimeline& rank : it.ranks) {
      for (const EventKind kind : {EventKind::kForward, EventKind::kBackward}) {
        for (const TimelineEvent& e : events_of(rank, kind)) {
          EXPECT_LT(e.duration_ms(), kComputeShare * kDelayMs)
              << "iteration " << it.iteration << " rank " << rank.rank << " " << event_kind_name(kind)
              << " of micro-batch " << e.microbatch << ": the slow peer's delay was timed as compute";
        }
      }
    }
  }
}

// Pipeline: the last stage waits for every activation of a stage that sends late.
// `coalesce`: the exchanges take NCCL's grouped path (one work, sends included).
void expect_pipeline_receives_as_waits(bool coalesce) {
  const Outcome o = run_job(coalesce ? "pp2_grouped" : "pp2", {1, 2, 1, 1}, /*slow_rank=*/0, "send", 2, coalesce);
  if (::testing::Test::HasFailure()) return;
  expect_compute_without_the_delay(o);
  for (const TimelineIteration& it : o.timelines) {
    const RankTimeline& last = it.ranks.at(1);
    const size_t receives = events_of(last, EventKind::kForward).size();  // one activation per forward
    ASSERT_GT(receives, 1u);
    const std::vector<TimelineEvent> waits = events_of(last, EventKind::kRecvWait);
    EXPECT_GE(total_ms(waits), kWaitShare * kDelayMs * static_cast<double>(receives))
        << "iteration " << it.iteration << ": stage 1 waited " << total_ms(waits) << " ms for " << receives
        << " activations, each sent " << kDelayMs << " ms late";
    std::cout << (coalesce ? "[pp2 grouped] iteration " : "[pp2] iteration ") << it.iteration << ": stage 1 receive waits " << total_ms(waits)
              << " ms for " << receives << " late activations; forwards " << total_ms(events_of(last, EventKind::kForward))
              << " ms\n";
  }
}

TEST(WaitTiming, PipelineReceiveFromASlowStageIsWaitNotCompute) { expect_pipeline_receives_as_waits(false); }

TEST(WaitTiming, PipelineReceiveFromASlowStageIsWaitNotComputeWhenExchangesAreGrouped) {
  expect_pipeline_receives_as_waits(true);
}

TEST(WaitTiming, DataParallelAllReduceWithASlowRankIsWaitNotCompute) {
  const Outcome o = run_job("dp2", {2, 1, 1, 1}, /*slow_rank=*/1, "allreduce", 2);
  if (HasFailure()) return;
  expect_compute_without_the_delay(o);
  for (size_t i = 0; i < o.timelines.size(); ++i) {
    const RankTimeline& waiting = o.timelines[i].ranks.at(0);
    const double reduce = total_ms(events_of(waiting, EventKind::kAllReduce));
    EXPECT_GE(reduce, kWaitShare * kDelayMs) << "iteration " << i << ": rank 0's all-reduce";
    EXPECT_LT(total_ms(events_of(waiting, EventKind::kOptimizer)), kComputeShare * kDelayMs) << "iteration " << i;
    EXPECT_GE(o.records[i].allreduce_ms, kWaitShare * kDelayMs);
    for (const double ms : o.records[i].microbatch_ms) EXPECT_LT(ms, kComputeShare * kDelayMs) << "iteration " << i;
    std::cout << "[dp2] iteration " << i << ": rank 0 all-reduce " << reduce << " ms\n";
  }
}

// The ring: every step's shard from a CP rank that sends late. `coalesce`: each send is
// fused with its receive, as on NCCL.
void expect_ring_receives_as_waits(bool coalesce) {
  const Outcome o = run_job(coalesce ? "cp2_grouped" : "cp2", {1, 1, 2, 1}, /*slow_rank=*/1, "send", 1, coalesce);
  if (::testing::Test::HasFailure()) return;
  for (const TimelineIteration& it : o.timelines) {
    const RankTimeline& waiting = it.ranks.at(0);
    const std::vector<TimelineEvent> steps = events_of(waiting, EventKind::kRingCompute);
    ASSERT_FALSE(steps.empty());
    for (const TimelineEvent& e : steps) {
      EXPECT_LT(e.duration_ms(), kComputeShare * kDelayMs) << "iteration " << it.iteration << " ring step of micro-batch "
                                                           << e.microbatch << ": the delay was timed as compute";
    }
    // Each forward and backward less the ring waits inside it is compute.
    for (const EventKind kind : {EventKind::kForward, EventKind::kBackward}) {
      for (const TimelineEvent& e : events_of(waiting, kind)) {
        double waited = 0;
        for (const TimelineEvent& w : events_of(waiting, EventKind::kRingWait, e.microbatch)) {
          if (w.start_ms >= e.start_ms && w.end_ms <= e.end_ms + 1e-3) waited += w.duration_ms();
        }
        EXPECT_GE(waited, kWaitShare * kDelayMs) << "iteration " << it.iteration << " " << event_kind_name(kind)
                                                 << " of micro-batch " << e.microbatch << ": its ring waits";
        EXPECT_LT(e.duration_ms() - waited, kComputeShare * kDelayMs)
            << "iteration " << it.iteration << " " << event_kind_name(kind) << " of micro-batch " << e.microbatch;
      }
    }
    std::cout << (coalesce ? "[cp2 grouped] iteration " : "[cp2] iteration ") << it.iteration << ": rank 0 ring waits "
              << total_ms(events_of(waiting, EventKind::kRingWait)) << " ms, ring steps "
              << total_ms(steps) << " ms\n";
  }
}

TEST(WaitTiming, ContextParallelRingFromASlowRankIsWaitNotCompute) { expect_ring_receives_as_waits(false); }

TEST(WaitTiming, ContextParallelRingFromASlowRankIsWaitNotComputeWhenPairsAreGrouped) {
  expect_ring_receives_as_waits(true);
}

TEST(WaitTiming, TensorParallelCollectiveWithASlowRankIsWaitNotCompute) {
  const Outcome o = run_job("tp2", {1, 1, 1, 2}, /*slow_rank=*/1, "allgather", 1);
  if (HasFailure()) return;
  for (size_t i = 0; i < o.timelines.size(); ++i) {
    const RankTimeline& waiting = o.timelines[i].ranks.at(0);
    for (const EventKind kind : {EventKind::kForward, EventKind::kBackward}) {
      for (const TimelineEvent& e : events_of(waiting, kind)) {
        double collectives = 0;
        for (const TimelineEvent& c : events_of(waiting, EventKind::kTensorParallel, e.microbatch)) {
          if (c.start_ms >= e.start_ms && c.end_ms <= e.end_ms + 1e-3) collectives += c.duration_ms();
        }
        EXPECT_GE(collectives, kWaitShare * kDelayMs) << "iteration " << i << " " << event_kind_name(kind)
                                                      << " of micro-batch " << e.microbatch << ": its TP collectives";
        EXPECT_LT(e.duration_ms() - collectives, kComputeShare * kDelayMs)
            << "iteration " << i << " " << event_kind_name(kind) << " of micro-batch " << e.microbatch;
      }
    }
    for (const auto& per_rank : o.records[i].tp_comm_ms) {
      ASSERT_FALSE(per_rank.empty());
      EXPECT_GE(per_rank[0], kWaitShare * kDelayMs) << "iteration " << i << ": tp_comm_ms of TP rank 0";
    }
    std::cout << "[tp2] iteration " << i << ": rank 0 TP collectives "
              << total_ms(events_of(waiting, EventKind::kTensorParallel)) << " ms, forwards "
              << total_ms(events_of(waiting, EventKind::kForward)) << " ms\n";
  }
}

}  // namespace
}  // namespace sb
