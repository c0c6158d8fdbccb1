// The simulator (harness/sim): hand-computable pipelines, the DP synchronisation wait,
// the communication model's numbers, the TP rule, determinism, the plan the real
// trainer makes, and the manifest's cluster block and tp rule.
#include <gtest/gtest.h>

#include <fstream>

#include "common/errors.h"
#include "harness/config/manifest.h"
#include "harness/latency/analytic_profile.h"
#include "harness/latency/latency_predictor.h"
#include "harness/latency/run_profiles/sim_profile.h"
#include "harness/sim/cluster_model.h"
#include "kernels/attention/patterns/moba/moba_coverage_model.h"
#include "harness/patterns/moba/moba_coverage_fit.h"
#include "harness/sim/pipeline_simulator.h"
#include "harness/sim/run_simulator.h"
#include "harness/sim/sim_runner.h"
#include "harness/trace/iteration_metrics.h"
#include "harness/train/plan_observations.h"
#include "harness/train/trainer.h"
#include "tests/support/manifest_error_path.h"
#include "tests/support/measured_run_folder.h"
#include "tests/support/run_command.h"
#include "tests/support/small_simulation.h"

namespace sb {
namespace {

using nlohmann::json;

PipelineSimInput uniform_input(int64_t dp, int64_t pp, int64_t m, double f, double b) {
  PipelineSimInput in;
  in.dp = dp;
  in.pp = pp;
  in.start_ms.assign(static_cast<size_t>(dp), 0.0);
  const std::vector<double> fs(static_cast<size_t>(m), f), bs(static_cast<size_t>(m), b), zs(static_cast<size_t>(m), 0.0);
  in.forward_ms.assign(static_cast<size_t>(dp), std::vector<std::vector<double>>(static_cast<size_t>(pp), fs));
  in.backward_ms.assign(static_cast<size_t>(dp), std::vector<std::vector<double>>(static_cast<size_t>(pp), bs));
  in.transfer_ms.assign(static_cast<size_t>(dp), std::vector<std::vector<double>>(static_cast<size_t>(pp), zs));
  in.allreduce_ms.assign(static_cast<size_t>(pp), 0.0);
  in.optimizer_ms.assign(static_cast<size_t>(pp), 0.0);
  return in;
}

PipelineMetrics metrics_of(const PipelineSimInput& in, const PipelineSimResult& r) {
  std::vector<int64_t> counts(static_cast<size_t>(in.dp), static_cast<int64_t>(in.forward_ms[0][0].size()));
  return compute_pipeline_metrics(r.ranks, in.dp, in.pp, counts);
}

TEST(PipelineSimulator, EqualMicrobatchesGiveTheTextbookBubble) {
  for (int64_t p : {1, 2, 4}) {
    for (int64_t m : {1, 4, 8}) {
      const PipelineSimInput in = uniform_input(1, p, m, 1.0, 2.0);
      const PipelineMetrics x = metrics_of(in, simulate_pipeline_iteration(in));
      // 1F1B with zero communication: (m + p - 1) (f + b), every stage busy m (f + b).
      EXPECT_DOUBLE_EQ(x.iter_ms, static_cast<double>(m + p - 1) * 3.0) << "p " << p << " m " << m;
      const double expected = static_cast<double>(p - 1) / static_cast<double>(m + p - 1);
      EXPECT_NEAR(x.bubble_fraction, expected, 1e-12);
      EXPECT_NEAR(x.bubble_fraction_max, expected, 1e-12);
    }
  }
}

TEST(PipelineSimulator, OneSlowMicrobatchFollowsTheCriticalPathByHand) {
  // p = 2, m = 2; micro-batch 0: F 1, B 2; micro-batch 1: F 3, B 6 (both stages).
  // Stage 0: F0 [0,1], F1 [1,4], B0 [4,6] (grad 0 from stage 1 at 4), B1 [13,19].
  // Stage 1: F0 [1,2], B0 [2,4], F1 [4,7], B1 [7,13]. Iteration 19, busy 12 on each.
  PipelineSimInput in = uniform_input(1, 2, 2, 1.0, 2.0);
  for (int s = 0; s < 2; ++s) {
    in.forward_ms[0][static_cast<size_t>(s)][1] = 3.0;
    in.backward_ms[0][static_cast<size_t>(s)][1] = 6.0;
  }
  const PipelineSimResult r = simulate_pipeline_iteration(in);
  const PipelineMetrics x = metrics_of(in, r);
  EXPECT_DOUBLE_EQ(x.iter_ms, 19.0);
  EXPECT_DOUBLE_EQ(x.busy_ms[0], 12.0);
  EXPECT_DOUBLE_EQ(x.busy_ms[1], 12.0);
  EXPECT_NEAR(x.bubble_fraction, 7.0 / 19.0, 1e-12);
  EXPECT_EQ(x.microbatch_ms, (std::vector<double>{6.0, 18.0}));
  for (const TimelineEvent& e : r.ranks[0].events) {
    if (e.kind == EventKind::kBackward && e.microbatch == 1) {
      EXPECT_DOUBLE_EQ(e.start_ms, 13.0);
      EXPECT_DOUBLE_EQ(e.end_ms, 19.0);
    }
  }
}

TEST(PipelineSimulator, TransfersDelayTheReceiverByTheirTime) {
  // p = 2, m = 1, F 1, B 2, each message 0.5: F0 [0,1], act at 1.5, F [1.5,2.5], B [2.5,4.5],
  // grad at 5, B [5,7].
  PipelineSimInput in = uniform_input(1, 2, 1, 1.0, 2.0);
  in.transfer_ms[0][0][0] = 0.5;
  const PipelineMetrics x = metrics_of(in, simulate_pipeline_iteration(in));
  EXPECT_DOUBLE_EQ(x.iter_ms, 7.0);
}

TEST(PipelineSimulator, DataParallelRanksWaitForTheSlowestAtTheAllReduce) {
  // dp 2, pp 1, one micro-batch each: rank 0 computes 3 ms, rank 1 9 ms; all-reduce 1 ms,
  // optimizer 0.5 ms. Rank 0's all-reduce spans its 6 ms wait: [3, 10].
  PipelineSimInput in = uniform_input(2, 1, 1, 1.0, 2.0);
  in.forward_ms[1][0][0] = 3.0;
  in.backward_ms[1][0][0] = 6.0;
  in.allreduce_ms = {1.0};
  in.optimizer_ms = {0.5};
  const PipelineSimResult r = simulate_pipeline_iteration(in);
  const PipelineMetrics x = metrics_of(in, r);
  EXPECT_DOUBLE_EQ(x.iter_ms, 10.5);
  EXPECT_DOUBLE_EQ(r.max_allreduce_ms, 7.0);
  bool seen = false;
  for (const TimelineEvent& e : r.ranks[0].events) {
    if (e.kind != EventKind::kAllReduce) continue;
    seen = true;
    EXPECT_DOUBLE_EQ(e.start_ms, 3.0);
    EXPECT_DOUBLE_EQ(e.end_ms, 10.0);
  }
  EXPECT_TRUE(seen);
  EXPECT_NEAR(x.idle_ms[0], 10.5 - 3.0, 1e-12);
}

TEST(PipelineSimulator, TheObservationExchangeEndsEveryRanksIterationTogether) {
  // dp 2, pp 1: rank 1 is 6 ms slower; optimizer 0.5 ms, then the exchange 0.25 ms from
  // the last rank's end. Each rank's plan_exchange event spans its wait.
  PipelineSimInput in = uniform_input(2, 1, 1, 1.0, 2.0);
  in.backward_ms[1][0][0] = 8.0;
  in.allreduce_ms = {0.0};
  in.optimizer_ms = {0.5};
  in.exchange_ms = 0.25;
  const PipelineSimResult r = simulate_pipeline_iteration(in);
  const double last = 1.0 + 8.0 + 0.5;
  for (const RankTimeline& t : r.ranks) {
    ASSERT_FALSE(t.events.empty());
    const TimelineEvent& e = t.events.back();
    EXPECT_EQ(e.kind, EventKind::kPlanExchange);
    EXPECT_DOUBLE_EQ(e.end_ms, last + 0.25);
    EXPECT_DOUBLE_EQ(t.end_ms, last + 0.25);
  }
  EXPECT_DOUBLE_EQ(r.ranks[1].events.back().start_ms, last);
  EXPECT_DOUBLE_EQ(metrics_of(in, r).iter_ms, last + 0.25);
  in.exchange_ms = 0;
  EXPECT_NE(simulate_pipeline_iteration(in).ranks[0].events.back().kind, EventKind::kPlanExchange);
}

TEST(ClusterModel, AlphaBetaAndRingAllReduceByHand) {
  const LinkSection link{5.0, 100.0};  // 5 us, 100 Gbit/s
  // 1 MB: 5 us + 8e6 bit / 1e11 bit/s = 0.005 + 0.08 ms.
  EXPECT_NEAR(alpha_beta_ms(link, 1e6), 0.085, 1e-12);
  // Ring of 4: 2 * 3/4 * 0.08 + 2 * 3 * 0.005 = 0.12 + 0.03 ms.
  EXPECT_NEAR(ring_allreduce_ms(link, 4, 1e6), 0.15, 1e-12);
  EXPECT_EQ(ring_allreduce_ms(link, 1, 1e6), 0.0);
}

TEST(ClusterModel, TreeAllReduceByHandAndTheFasterOfTheTwo) {
  const LinkSection link{5.0, 100.0};
  // Tree of 4: 2 x log2(4) x 0.005 + 2 x 0.08 = 0.02 + 0.16 ms; of 5: depth 3.
  EXPECT_NEAR(tree_allreduce_ms(link, 4, 1e6), 0.18, 1e-12);
  EXPECT_NEAR(tree_allreduce_ms(link, 5, 1e6), 0.19, 1e-12);
  EXPECT_EQ(tree_allreduce_ms(link, 1, 1e6), 0.0);
  // Few ranks: the ring (0.15 ms); 16,384 ranks: the tree (0.30 ms against the ring's
  // 2 x 16,383 latencies, 164 ms).
  EXPECT_NEAR(fastest_allreduce_ms(link, 4, 1e6), 0.15, 1e-12);
  EXPECT_NEAR(fastest_allreduce_ms(link, 16384, 1e6), 2 * 14 * 0.005 + 0.16, 1e-12);
  EXPECT_GT(ring_allreduce_ms(link, 16384, 1e6), 160.0);
}

TEST(ClusterModel, RanksArePlacedTpInnermostThenPpThenDp) {
  const ClusterModel c(cluster_preset("h200"), 2, 4, 2);  // 16 ranks on 2 nodes of 8
  EXPECT_EQ(c.world_rank(0, 1, 1), 3);
  EXPECT_EQ(c.world_rank(1, 0, 0), 8);
  EXPECT_EQ(c.node_count(), 2);
  // A pipeline stays on its node; the DP ring of a stage spans both nodes.
  EXPECT_EQ(c.pipeline_link(1, 2).bandwidth_gbps, c.cluster().intra_node.bandwidth_gbps);
  EXPECT_EQ(c.data_parallel_link(0).bandwidth_gbps, c.cluster().inter_node.bandwidth_gbps);
  EXPECT_EQ(c.tensor_parallel_link(1, 3).bandwidth_gbps, c.cluster().intra_node.bandwidth_gbps);
  const ClusterModel one_node(cluster_preset("h200"), 2, 4, 1);
  EXPECT_EQ(one_node.data_parallel_link(3).bandwidth_gbps, one_node.cluster().intra_node.bandwidth_gbps);
}

TEST(CoverageModel, ZipfCoverageByHandAndTheFloor) {
  const ZipfCoverageModel uniform(0.0, 4);
  // s = 0, 8 tokens = 2 blocks: query block 0 sees 1 block (C = 1), block 1 sees 2; k = 1 covers 1/2.
  EXPECT_DOUBLE_EQ(uniform.coverage(8, 1), (1.0 + 0.5) / 2.0);
  EXPECT_DOUBLE_EQ(uniform.coverage(8, 2), 1.0);
  const ZipfCoverageModel zipf(1.0, 4);
  // s = 1, 3 blocks, k = 2: (1 + 1 + H2/H3) / 3 with H2 = 1.5, H3 = 11/6.
  EXPECT_NEAR(zipf.coverage(12, 2), (2.0 + 1.5 / (11.0 / 6.0)) / 3.0, 1e-12);
  // The floor is the smallest k keeping ratio x C(k0); p = 0 never lowers the budget.
  const int64_t floor = zipf.floor_budget(4096, 32, 0.9);
  EXPECT_GE(zipf.coverage(4096, floor), 0.9 * zipf.coverage(4096, 32));
  EXPECT_LT(zipf.coverage(4096, floor - 1), 0.9 * zipf.coverage(4096, 32));
  EXPECT_EQ(zipf.effective_budget(4096, 1, 32, 1.0), 32);
  EXPECT_EQ(zipf.effective_budget(4096, 40, 32, 0.9), 40);
}

// One DP rank, one pipeline stage, one sample per micro-batch, SAB+DST.
json tiny_manifest_json() {
  json j = test::small_simulation_manifest_json();
  j["name"] = "simtest";
  j["seed"] = 5;
  j["parallelism"] = {{"dp", 1}, {"pp", 1}};
  j["train"] = {{"iterations", 4},          {"warmup_iterations", 1},          {"global_batch_size", 6},
                {"max_tokens_per_microbatch", 64}, {"max_samples_per_microbatch", 1}, {"threads", 1}};
  j["method_defaults"]["dst"] = {{"k_max", 4}};
  j["methods"] = json::array({{{"name", "x"}, {"preset", "sab+dst"}}});
  return j;
}

Manifest tiny_run(json j) { return expand_runs(parse_manifest(j, "<test>")).at(0).manifest; }

TEST(CoverageFit, RecoversTheExponentThatMadeTheObservations) {
  // Observations made by the model itself at s = 0.7 (packed and single sequences,
  // budgets 1..8): the fit must find 0.7 with a zero residual.
  std::vector<CoverageObservation> observations;
  for (int64_t k : {1, 2, 4, 8}) {
    for (const std::vector<int64_t>& lengths : {std::vector<int64_t>{100}, {512}, {2048}, {64, 700, 300}}) {
      CoverageObservation o{lengths, k, 0.0};
      o.coverage = modelled_coverage(o, 0.7, 32);
      observations.push_back(o);
    }
  }
  const CoverageFit fit = fit_coverage_exponent(observations, 32);
  EXPECT_NEAR(fit.exponent, 0.7, 1e-3);
  EXPECT_LT(fit.rmse, 1e-4);
  EXPECT_EQ(fit.points, 16);
  // Packed micro-batches weigh each sequence by its query blocks: 2 + 22 + 10 blocks.
  const ZipfCoverageModel model(0.7, 32);
  const CoverageObservation packed{{64, 700, 300}, 4, 0.0};
  EXPECT_NEAR(modelled_coverage(packed, 0.7, 32),
              (2 * model.coverage(64, 4) + 22 * model.coverage(700, 4) + 10 * model.coverage(300, 4)) / 34, 1e-12);
  EXPECT_THROW(fit_coverage_exponent({}, 32), std::invalid_argument);
}

TEST(CoverageFit, ReadsMeasuredRunsOfTheSameBlockSizeOnly) {
  const std::filesystem::path dir = test::fresh_temp_dir("coverage_fit");
  const auto write_run = [&](const std::string& name, int64_t block, bool simulated, const std::string& gate = "") {
    std::vector<IterationRecord> records;
    for (int64_t it = 0; it < 3; ++it) {
      IterationRecord r;
      r.iteration = it;
      r.warmup = it == 0;
      r.microbatch_tokens = {1000, 300};
      r.microbatch_lengths = {{1000}, {300}};
      r.layer_budgets = {{4, 6}, {4, 4}};
      r.layer_coverage.clear();
      for (size_t k = 0; k < 2; ++k) {
        r.layer_coverage.emplace_back();
        for (double budget : r.layer_budgets[k]) {
          const CoverageObservation o{r.microbatch_lengths[k], static_cast<int64_t>(budget), 0.0};
          r.layer_coverage.back().push_back(modelled_coverage(o, 1.3, block));
        }
      }
      records.push_back(r);
    }
    json attention{{"name", "moba"}, {"block_size", block}};
    if (!gate.empty()) attention["gate"] = gate;
    test::write_measured_run_folder(dir / name, simulated, records,
                                    json{{"methods", json::array({{{"attention", attention}}})}});
  };
  write_run("measured", 32, false);  // no "gate": resolved before the key existed, the block gate
  write_run("other_block", 64, false);
  write_run("simulated", 32, true);
  write_run("token_gate", 32, false, "token");
  const CoverageFit fit =
      fit_coverage_from_results(dir, 32, MobaGate::kBlock, "m.json", "$.simulation.coverage.fit_from");
  EXPECT_NEAR(fit.exponent, 1.3, 1e-3);
  EXPECT_EQ(fit.points, 2 * 2 * 2);  // 2 measured iterations x 2 micro-batches x 2 layers
  EXPECT_EQ(fit.runs, (std::vector<std::string>{(dir / "measured").string()}));
  try {
    fit_coverage_from_results(dir, 16, MobaGate::kBlock, "m.json", "$.simulation.coverage.fit_from");
    FAIL() << "no run has block size 16";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.json_path(), "$.simulation.coverage.fit_from");
  }
  EXPECT_EQ(fit_coverage_from_results(dir, 32, MobaGate::kToken, "m.json", "$").runs,
            (std::vector<std::string>{(dir / "token_gate").string()}));
  EXPECT_THROW(fit_coverage_from_results(dir / "missing", 32, MobaGate::kBlock, "m.json", "$"), ConfigError);
  std::filesystem::remove_all(dir);
}

TEST(RunSimulator, SameSeedSameRecords) {
  const Manifest m = tiny_run(tiny_manifest_json());
  RunSimulator a = test::simulator_of(m), b = test::simulator_of(m);
  for (int64_t it = 0; it < 4; ++it) {
    const SimulatedIteration x = a.simulate_iteration(it), y = b.simulate_iteration(it);
    EXPECT_EQ(iteration_record_to_json(x.record).dump(), iteration_record_to_json(y.record).dump());
    EXPECT_EQ(timeline_iteration_to_json(x.timeline).dump(), timeline_iteration_to_json(y.timeline).dump());
    EXPECT_FALSE(iteration_record_to_json(x.record).contains("loss")) << "nothing trained: no loss written";
  }
}

TEST(RunSimulator, RecordsTheModelledBudgetOfEveryLayer) {
  // The coverage model's budget, one value per layer of every micro-batch (the report's
  // effective_budget_mean reads these): the requested budget where no floor applies
  // (fixed budgets), never below the request and never above k0 or k_max under DST. Every
  // layer also records the micro-batch's modelled coverage, and under DST its floor, as
  // the trainer's records do (no floors without one).
  for (const char* preset : {"baseline", "sab+dst"}) {
    json j = tiny_manifest_json();
    j["methods"] = json::array({{{"name", "x"}, {"preset", preset}}});
    j["simulation"]["coverage"] = {{"model", "zipf"}, {"exponent", 1.0}};
    const Manifest m = tiny_run(j);
    RunSimulator sim = test::simulator_of(m);
    const int64_t layers = qwen2_preset("qwen2-test").num_hidden_layers;
    for (int64_t it = 0; it < 3; ++it) {
      const IterationRecord r = sim.simulate_iteration(it).record;
      ASSERT_EQ(r.layer_budgets.size(), r.budgets.size()) << preset;
      ASSERT_FALSE(r.budgets.empty());
      for (size_t k = 0; k < r.budgets.size(); ++k) {
        ASSERT_EQ(static_cast<int64_t>(r.layer_budgets[k].size()), layers);
        for (double b : r.layer_budgets[k]) {
          EXPECT_EQ(b, r.layer_budgets[k][0]) << "one modelled budget for every layer";
          if (std::string(preset) == "baseline") {
            EXPECT_EQ(b, static_cast<double>(r.budgets[k]));
          } else {
            EXPECT_GE(b, static_cast<double>(r.budgets[k]));
            EXPECT_LE(b, 4.0);
          }
        }
        ASSERT_EQ(r.layer_coverage.size(), r.budgets.size());
        ASSERT_EQ(static_cast<int64_t>(r.layer_coverage[k].size()), layers);
        for (double c : r.layer_coverage[k]) EXPECT_DOUBLE_EQ(c, r.coverage[k]);
        EXPECT_GT(r.coverage[k], 0.0);
        EXPECT_LE(r.coverage[k], 1.0);
      }
      if (std::string(preset) == "baseline") {
        EXPECT_TRUE(r.layer_floors.empty()) << "no floor asked";
      } else {
        ASSERT_EQ(r.layer_floors.size(), r.budgets.size());
        for (size_t k = 0; k < r.layer_floors.size(); ++k) {
          for (int64_t f : r.layer_floors[k]) {
            EXPECT_EQ(f, r.layer_floors[k][0]);
            EXPECT_GE(f, 1);
          }
        }
      }
    }
  }
}

// TP 2 on one stage: compute halved, plus the trainer's collectives worked out by hand: per
// layer 2 all-gathers and 2 reduce-scatters of the [T, H] stream each way, the
// embedding's and the head's (each way), and the loss's all-reduces of [T] and [2, T]
// (forward). A gather of B bytes over 2 ranks: alpha + B / 2 / bandwidth; on the CPU
// (Gloo) a reduce-scatter is an all-reduce, 2 gathers' worth. MoBA without a floor: no
// attention sums.
TEST(RunSimulator, TensorParallelismDividesComputeAndAddsTheTrainersCollectives) {
  json j = tiny_manifest_json();
  j["methods"] = json::array({{{"name", "x"}, {"preset", "baseline"}}});
  j["train"]["global_batch_size"] = 1;
  const Manifest m1 = tiny_run(j);
  j["parallelism"]["tp"] = 2;
  const Manifest m2 = tiny_run(j);
  RunSimulator a = test::simulator_of(m1), b = test::simulator_of(m2);
  const SimulatedIteration x = a.simulate_iteration(0), y = b.simulate_iteration(0);
  const Qwen2Config& c = qwen2_preset("qwen2-test");
  const LinkSection link = cluster_preset("h200").intra_node;
  const auto gather_ms = [&](double bytes) {
    return link.alpha_us / 1000.0 + bytes / 2.0 * 8.0 / (link.bandwidth_gbps * 1e9) * 1000.0;
  };
  const int64_t tokens = x.record.tokens;
  const double stream = static_cast<double>((tokens + 1) / 2 * 2 * c.hidden_size) * 4.0;  // fp32, rows padded to 2
  const double row = static_cast<double>(tokens) * 4.0;
  // Per direction 6 per layer, and the embedding's and head's 3.
  const double gathers = 2.0 * (6.0 * static_cast<double>(c.num_hidden_layers) + 3.0);
  const double tp_ms = gathers * gather_ms(stream) + 2.0 * gather_ms(row) + 2.0 * gather_ms(2.0 * row);
  // One rank exchanges nothing; two end their iteration with the planner's exchange.
  EXPECT_EQ(x.record.plan_exchange_ms, 0.0);
  EXPECT_GT(y.record.plan_exchange_ms, 0.0);
  EXPECT_NEAR(y.record.iter_ms, x.record.iter_ms / 2.0 + tp_ms + y.record.plan_exchange_ms, 1e-9);
  ASSERT_EQ(y.record.tp_comm_ms.size(), 1u);
  EXPECT_NEAR(y.record.tp_comm_ms[0][0], tp_ms, 1e-9);
  EXPECT_TRUE(x.record.tp_comm_ms.empty());
}

TEST(RunSimulator, BalanceOverheadIsThePlannerAndTheObservationExchange) {
  // dp 2 x pp 2 on one node of 8: the exchange of the plan's slots over the intra-node link,
  // the faster of ring and tree, added to the planner's (fixed) time.
  const Manifest m = tiny_run(test::small_simulation_manifest_json());
  RunSimulatorOptions o;
  o.fixed_plan_ms = 1.5;
  RunSimulator sim(m, load_sim_profile(m, 64, std::nullopt), simulation_cluster(m), o);
  const SimulatedIteration x = sim.simulate_iteration(0);
  const ParallelLayout layout(m.parallelism.dp, m.parallelism.pp, m.model.config.num_hidden_layers,
                              m.parallelism.stage_layers);
  const double bytes = PlanObservationSlots(x.plan, layout, static_cast<size_t>(m.train.global_batch_size)).bytes();
  const double expected = fastest_allreduce_ms(sim.cluster().cluster().intra_node, 4, bytes);
  EXPECT_GT(expected, 0.0);
  EXPECT_DOUBLE_EQ(x.record.plan_exchange_ms, expected);
  EXPECT_DOUBLE_EQ(x.record.balance_overhead_ms, 1.5 + expected);
  for (const RankTimeline& t : x.timeline.ranks) {
    ASSERT_FALSE(t.events.empty());
    EXPECT_EQ(t.events.back().kind, EventKind::kPlanExchange);
  }
}

TEST(RunSimulator, MicrobatchTimeIsThePredictorsStageTimesSummed) {
  json j = tiny_manifest_json();
  j["methods"] = json::array({{{"name", "x"}, {"preset", "baseline"}}});
  j["parallelism"]["pp"] = 2;
  const Manifest m = tiny_run(j);
  RunSimulator sim = test::simulator_of(m);
  const SimulatedIteration x = sim.simulate_iteration(0);
  const LatencyPredictor& p = *sim.profile().predictor;
  size_t k = 0;
  for (const auto& rank : x.plan.ranks) {
    for (const PlannedMicroBatch& mb : rank) {
      const std::vector<int64_t> lengths{mb.tokens};  // one sequence per micro-batch
      const double expected = p.stage_ms(lengths, 2, m.parallelism.stage_layers[0], false) +
                              p.stage_ms(lengths, 2, m.parallelism.stage_layers[1], true);
      EXPECT_NEAR(x.record.microbatch_ms.at(k), expected, 1e-9);
      EXPECT_NEAR(x.record.microbatch_pred_ms.at(k), expected, 1e-9);
      ++k;
    }
  }
}

TEST(RunSimulator, PlansEqualTheRealTrainersPlans) {
  for (const char* preset : {"sab+dst", "lbb+dst", "sab", "baseline"}) {
    json j = tiny_manifest_json();
    j["methods"] = json::array({{{"name", "x"}, {"preset", preset}}});
    const Manifest m = tiny_run(j);
    RunSimulator sim = test::simulator_of(m);
    RunSpec run = expand_runs(parse_manifest(j, "<test>")).at(0);
    TrainerOptions options;
    options.predictor = sim.profile().predictor;  // the same profile the simulation plans with
    const Qwen2Config& config = qwen2_preset(m.model.preset);
    Trainer trainer(run, RankContext::single_process(ParallelLayout(1, 1, config.num_hidden_layers), c10::kCPU),
                    options);
    // sab+dst learns from realized budgets (the real backend's floor vs the coverage model),
    // so only its first plan must agree; the others never change their planner state.
    const int64_t iterations = std::string(preset) == "sab+dst" ? 1 : 3;
    for (int64_t it = 0; it < iterations; ++it) {
      const GlobalBatchPlan real = trainer.compute_gradients(it).plan;
      const GlobalBatchPlan simulated = sim.simulate_iteration(it).plan;
      ASSERT_EQ(real.ranks.size(), simulated.ranks.size());
      for (size_t r = 0; r < real.ranks.size(); ++r) {
        ASSERT_EQ(real.ranks[r].size(), simulated.ranks[r].size()) << preset << " iteration " << it;
        for (size_t k = 0; k < real.ranks[r].size(); ++k) {
          EXPECT_EQ(real.ranks[r][k].samples, simulated.ranks[r][k].samples) << preset << " iteration " << it;
          EXPECT_EQ(real.ranks[r][k].budget, simulated.ranks[r][k].budget) << preset << " iteration " << it;
          EXPECT_EQ(real.ranks[r][k].predicted_ms, simulated.ranks[r][k].predicted_ms);
        }
      }
    }
  }
}

TEST(SimulationManifest, ClusterBlockErrorsNameTheJsonPath) {
  json j = tiny_manifest_json();
  j["cluster"]["intra_node"] = {{"alpha_us", 1}, {"bandwidth", 5}};
  EXPECT_EQ(test::manifest_error_path(j), "$.cluster.intra_node.bandwidth");
  j = tiny_manifest_json();
  j["cluster"]["preset"] = "tpu";
  EXPECT_EQ(test::manifest_error_path(j), "$.cluster.preset");
  j = tiny_manifest_json();
  j["cluster"]["inter_node"] = {{"bandwidth_gbps", 0}};
  EXPECT_EQ(test::manifest_error_path(j), "$.cluster.inter_node.bandwidth_gbps");
  j = tiny_manifest_json();
  j["cluster"]["gpus"] = 8;
  EXPECT_EQ(test::manifest_error_path(j), "$.cluster.gpus");
  j = tiny_manifest_json();
  j["simulation"]["profile"] = {{"analytic", json::object()}, {"file", "/p.json"}};
  EXPECT_EQ(test::manifest_error_path(j), "$.simulation.profile.analytic");
  // Resolved form round trip with the blocks.
  const Manifest m = parse_manifest(tiny_manifest_json(), "m.json");
  EXPECT_EQ(manifest_to_json(parse_manifest(manifest_to_json(m), "m.json")), manifest_to_json(m));
}

// The trainer runs tp where it splits the model (qwen2-test: 2 key/value heads,
// intermediate size 64): tp 2 passes, tp 4 is refused naming the heads; tp 0 is malformed.
TEST(SimulationManifest, TrainerTakesTpThatSplitsTheModelsKeyValueHeads) {
  json j = tiny_manifest_json();
  j["methods"] = json::array({{{"name", "x"}, {"preset", "baseline"}}});  // no profile needed
  j["parallelism"]["tp"] = 2;
  const Manifest m = parse_manifest(j, "m.json");
  EXPECT_EQ(m.parallelism.tp, 2);
  EXPECT_NO_THROW(check_runnable_by_trainer(m));
  j["parallelism"]["tp"] = 4;
  try {
    check_runnable_by_trainer(parse_manifest(j, "m.json"));
    ADD_FAILURE() << "tp 4 accepted with 2 key/value heads";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.json_path(), "$.parallelism.tp");
    EXPECT_NE(e.problem().find("key/value heads"), std::string::npos) << e.problem();
  }
  j["parallelism"]["tp"] = 0;
  EXPECT_EQ(test::manifest_error_path(j), "$.parallelism.tp");
}

// A profile measured for the run's tp times one TP rank's share of a layer, so the
// simulator takes its compute as it is; a whole layer's profile it divides by tp. At tp 2,
// per micro-batch: share - divided = (the tp 1 run's time) / 2, the TP all-reduces being
// the same in both. A profile of another tp is refused.
TEST(SimulationManifest, ATpShareProfileIsNotDividedAgain) {
  json j = tiny_manifest_json();
  j["methods"] = json::array({{{"name", "x"}, {"preset", "baseline"}}});
  const Manifest one = tiny_run(j);
  j["parallelism"]["tp"] = 2;
  const Manifest two = tiny_run(j);
  const SimProfile whole = load_sim_profile(two, 64, std::nullopt);
  const auto profiled_for = [&](int64_t tp, const std::string& collectives = "") {
    LatencyProfile profile = whole.predictor->profile();
    profile.training.tensor_parallel = tp;
    profile.training.tensor_parallel_collectives = collectives;
    SimProfile s = whole;
    s.predictor = std::make_shared<const LatencyPredictor>(profile, whole.predictor->options());
    return s;
  };
  RunSimulatorOptions options;
  options.fixed_plan_ms = 0;
  const auto record_of = [&](const Manifest& m, const SimProfile& profile) {
    RunSimulator simulator(m, profile, simulation_cluster(m), options);
    return simulator.simulate_iteration(0).record;
  };
  const auto microbatch_ms = [&](const Manifest& m, const SimProfile& profile) {
    return record_of(m, profile).microbatch_ms;
  };
  const std::vector<double> base = microbatch_ms(one, whole);
  const std::vector<double> divided = microbatch_ms(two, whole);
  const std::vector<double> share = microbatch_ms(two, profiled_for(2));
  ASSERT_FALSE(base.empty());
  ASSERT_EQ(share.size(), base.size());
  ASSERT_EQ(divided.size(), base.size());
  for (size_t i = 0; i < base.size(); ++i) {
    EXPECT_GT(divided[i], base[i] / 2) << "the TP all-reduces are in the tp 2 times";
    EXPECT_NEAR(share[i] - divided[i], base[i] / 2, 1e-9 * base[i]) << "micro-batch " << i;
  }
  // A share timed with the TP collectives has them in its compute: the simulator records
  // the modelled ones but does not add them again.
  const IterationRecord apart = record_of(two, profiled_for(2)), timed = record_of(two, profiled_for(2, "gloo"));
  ASSERT_EQ(timed.tp_comm_ms.size(), base.size());
  EXPECT_EQ(timed.tp_comm_ms, apart.tp_comm_ms);
  for (size_t i = 0; i < base.size(); ++i) {
    EXPECT_GT(timed.tp_comm_ms[i][0], 0.0);
    EXPECT_NEAR(timed.microbatch_ms[i] + timed.tp_comm_ms[i][0], apart.microbatch_ms[i], 1e-9 * base[i]);
  }
  try {
    RunSimulator simulator(two, profiled_for(3), simulation_cluster(two), options);
    ADD_FAILURE() << "a profile measured for tp 3 accepted for tp 2";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.json_path(), "$.simulation.profile");
  }
  // A profile of whole CP micro-batches: the ring model needs a one-rank profile.
  SimProfile ringed = profiled_for(1);
  LatencyProfile cp_profile = ringed.predictor->profile();
  cp_profile.training.context_parallel = 2;
  ringed.predictor = std::make_shared<const LatencyPredictor>(cp_profile, whole.predictor->options());
  try {
    RunSimulator simulator(one, ringed, simulation_cluster(one), options);
    ADD_FAILURE() << "a profile timed on CP ranks accepted by the simulator";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.json_path(), "$.simulation.profile");
    EXPECT_NE(e.problem().find("one-rank profile"), std::string::npos) << e.problem();
  }
}

// `run` refuses a tp the model cannot split before any rank starts; `simulate` models it
// (the simulator's TP rule needs no split of real heads).
TEST(SimulationManifest, RunCommandRefusesATpTheModelCannotSplit) {
  const auto dir = test::fresh_temp_dir("sim_tp");
  json j = tiny_manifest_json();
  j["parallelism"]["tp"] = 4;
  j["methods"] = json::array({{{"name", "x"}, {"preset", "baseline"}}});
  std::ofstream(dir / "m.json") << j.dump();
  const test::CommandResult r = test::run_command(test::sparsebalance_binary() + " run " + (dir / "m.json").string() +
                                                  " --results " + (dir / "results").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("$.parallelism.tp"), std::string::npos) << r.output;
  const test::CommandResult s = test::run_command(test::sparsebalance_binary() + " simulate " +
                                                  (dir / "m.json").string() + " --results " + (dir / "results").string());
  EXPECT_EQ(s.exit_code, 0) << s.output;
}

}  // namespace
}  // namespace sb
