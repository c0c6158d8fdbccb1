#pragma once
// One simulated run: the run's data (the same Dataset the trainer reads, so every
// iteration has the real run's sample lengths), the same BatchPlanner (same policies,
// same options, same predictor and observations), then per iteration the stage times
// from the predictor, the communication model and the 1F1B discrete-event simulation
// (pipeline_simulator.h), turned into the IterationRecord and timelines a real run
// writes (docs/simulator.md).
//
// Per micro-batch m with samples of lengths L_i, planned budget k_m, each sequence's
// budget k_i from the pattern's simulation model (harness/patterns/attention_simulation.h:
// DST's coverage floor applied per sequence, or a sequence's kept keys per query), T tokens:
//   compute of stage s  = layers_s x (sum_i attention_ms(L_i, k_i) + rest_ms(T))
//                         (+ head_ms(T) on the last stage when the predictor includes it)
//   with TP:              compute / tp + layers_s x 4 ring all-reduces of T x hidden x
//                         act_bytes over the TP group (2 in the forward, 2 in the backward)
//   forward / backward  = forward_fraction / (1 - forward_fraction) of the compute, plus
//                         2 TP all-reduces per layer each
//   stage transfer      = alpha-beta of T x hidden x act_bytes / tp (sequence-parallel
//                         shards; act_bytes 2 for bf16-mixed, 4 for fp32)
//   latency noise       = every stage's compute of the micro-batch x the same factor
//                         exp(sigma z + rank_sigma z_rank), z_rank shared by the DP
//                         rank's micro-batches of the iteration (latency_noise.h; both 0
//                         unless the manifest's simulation.latency_noise gives or fits them)
//   DP all-reduce       = ring over dp x cp of (trained parameters of the stage / tp) x 4
//                         bytes (fp32 gradients; LoRA: only the adapters)
//   with CP (cp > 1)    each stage's forward and backward of the micro-batch come from
//                         the ring's event model (cp_stage_compute.h, ring_timing_model.h:
//                         per-rank compute from the profile split by the ring's work
//                         model, ring transfers alpha-beta over the CP ranks' links); the
//                         stage transfer carries the largest CP shard
//   optimizer           = simulation.optimizer_ms, or AdamW's memory traffic: 28 bytes per
//                         trained parameter of the rank (read param, grad, m, v; write param,
//                         m, v; fp32) / memory bandwidth
// Iteration start: the planner's measured wall time on every rank.
// Iteration end: the planner's observation exchange, an all-reduce of every rank of
//   PlanObservationSlots' bytes (harness/train/plan_observations.h), the faster of ring and
//   tree over the world (cluster_model.h); balance_overhead_ms = planner + exchange.
// Records: loss and grad_norm are NaN (omitted from records.jsonl: nothing was trained);
// coverage[k] is the coverage model's value, budgets[k] the planned budget.

#include <cstdint>
#include <memory>
#include <optional>

#include "harness/balance/batch_planner.h"
#include "harness/config/manifest.h"
#include "harness/data/dataset.h"
#include "harness/records/iteration_record.h"
#include "harness/latency/run_profiles/sim_profile.h"
#include "harness/patterns/attention_simulation.h"
#include "harness/sim/cluster_model.h"
#include "harness/sim/cp_stage_compute.h"
#include "harness/sim/latency_noise.h"
#include "harness/sim/pipeline_simulator.h"
#include "harness/sim/tensor_parallel_comm_model.h"
#include "harness/trace/timeline.h"

namespace sb {

struct RunSimulatorOptions {
  // Negative: measure the planner call's wall time; otherwise use this (deterministic
  // timelines for tests and comparisons).
  double fixed_plan_ms = -1;
};

struct SimulatedIteration {
  IterationRecord record;
  TimelineIteration timeline;
  GlobalBatchPlan plan;
  double simulate_ms = 0;  // wall time of the event simulation itself (benchmarks)
};

class RunSimulator {
 public:
  // run_manifest: one run's manifest; cluster: the cluster block or its default.
  RunSimulator(const Manifest& run_manifest, SimProfile profile, ClusterSection cluster,
               RunSimulatorOptions options = {});

  // Iterations must be simulated in order (the planner learns from each).
  SimulatedIteration simulate_iteration(int64_t iteration);

  const SimProfile& profile() const { return profile_; }
  const ClusterModel& cluster() const { return cluster_; }
  // The pattern's model of its attention (its settings fitted already, when fit_from gave them).
  const AttentionSimulation& attention() const { return *attention_; }
  const SimulationSection& simulation() const { return simulation_; }
  BatchPlanner& planner() { return *planner_; }

 private:
  // Whether the profile was timed on this run's TP ranks with their collectives
  // (LatencyProfileTraining::tensor_parallel_collectives): its compute includes the TP
  // communication, which the simulator then records but does not add.
  bool profile_times_tp_collectives() const;

  // cp > 1: one micro-batch of DP rank d on every stage (ring_timing_model.h), appended
  // to `in`, and its per-CP-rank attention time and kept pairs to `record`.
  void simulate_context_parallel_microbatch(int64_t d, const PlannedMicroBatch& mb, const std::vector<int64_t>& lengths,
                                            const std::vector<int64_t>& budgets, double noise,
                                            PipelineSimInput& in, IterationRecord& record) const;

  Manifest manifest_;
  SimProfile profile_;
  ClusterModel cluster_;
  RunSimulatorOptions options_;
  SimulationSection simulation_;
  std::unique_ptr<Dataset> dataset_;
  std::unique_ptr<BatchPlanner> planner_;
  std::unique_ptr<AttentionSimulation> attention_;
  LatencyNoise noise_;
  std::vector<double> stage_trained_params_;  // [stage], whole stage (all TP ranks)
  std::vector<double> stage_dp_bytes_;        // [stage], stage_dp_allreduce_bytes
  std::optional<CpComputeSpec> cp_spec_;      // cp > 1
  double elapsed_ms_ = 0;                     // simulated time of the iterations so far
};

// Trained parameters of each stage (LoRA: adapters only), for the DP all-reduce and the
// optimizer model.
std::vector<double> stage_trained_parameters(const Manifest& manifest);

// Bytes each stage's DP ring all-reduces: one TP rank's share of the stage's trained
// parameters as fp32 gradients (4 bytes each). What the simulator sends and what the
// all-reduce fit (allreduce_fit.h) divides measured times by.
std::vector<double> stage_dp_allreduce_bytes(const Manifest& manifest);
// What stage `stage` of the run holds for its TP collectives (tensor_parallel_comm_model.h),
// for a micro-batch that asks for a coverage floor and budgets or not.
TensorParallelStage tensor_parallel_stage(const Manifest& manifest, int64_t stage, bool floor, bool budgeted);
// The same for a planned micro-batch (its floor ratio and budgets).
TensorParallelStage tensor_parallel_stage(const Manifest& manifest, int64_t stage, const PlannedMicroBatch& mb);

}  // namespace sb
