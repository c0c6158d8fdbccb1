// The intra-node bandwidth fitted to measured DP all-reduces (cluster.intra_node.fit_from,
// harness/sim/fit/allreduce_fit.h): which events, iterations and stages it reads, the
// bandwidth worked out by hand from the ring model, the runs it leaves out, its errors,
// the manifest key (intra_node only) and `simulate` putting the fitted value into the
// runs it plans.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <map>
#include <fstream>
#include <sstream>

#include "common/errors.h"
#include "harness/config/manifest.h"
#include "harness/records/iteration_record.h"
#include "harness/report/run_summary.h"
#include "harness/sim/cluster_model.h"
#include "harness/sim/fit/allreduce_fit.h"
#include "harness/sim/run_simulator.h"
#include "harness/sim/sim_runner.h"
#include "harness/trace/timeline.h"
#include "tests/support/manifest_error_path.h"
#include "tests/support/measured_run_folder.h"
#include "tests/support/run_command.h"
#include "tests/support/small_simulation.h"

namespace sb {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

RankTimeline rank_with_allreduce(int64_t rank, int64_t dp_rank, int64_t stage, double entry_ms, double exit_ms) {
  RankTimeline t;
  t.rank = rank;
  t.dp_rank = dp_rank;
  t.stage = stage;
  t.start_ms = 0;
  t.events = {{EventKind::kForward, 0, 0, 40},
              {EventKind::kBackward, 0, 40, entry_ms},
              {EventKind::kAllReduce, -1, entry_ms, exit_ms},
              {EventKind::kOptimizer, -1, exit_ms, exit_ms + 2}};
  t.end_ms = exit_ms + 2;
  return t;
}

// The small simulation manifest's layout (DP2 x PP2, qwen2-test: untied embeddings), with
// `dp` DP ranks.
json resolved_manifest(int64_t dp, const std::string& preset = "qwen2-test") {
  json m = test::small_simulation_manifest_json();
  m["parallelism"]["dp"] = dp;
  m["model"]["preset"] = preset;
  return m;
}

// Iteration 0 is warm-up (wild values), 1 and 2 are measured, 3 has a timeline but no
// record (interrupted between the two writes). Ranks: world rank = dp_rank * 2 + stage.
//   iteration 1, stage 0: entries 100 and 101.5, exits 103 and 103.2 -> 1.7 ms
//                stage 1: entries 90 and 92, exits 95 and 94.5        -> 3.0 ms
//   iteration 2, stage 0: entries 80 and 80, exits 83.3 and 83.3      -> 3.3 ms
//                stage 1: entries 70 and 71, exits 73 and 73          -> 2.0 ms
void write_dp2_run(const fs::path& dir, bool simulated, const std::string& preset = "qwen2-test") {
  std::vector<IterationRecord> records(3);
  for (int64_t it = 0; it < 3; ++it) {
    records[static_cast<size_t>(it)].iteration = it;
    records[static_cast<size_t>(it)].warmup = it == 0;
  }
  test::write_measured_run_folder(dir, simulated, records, resolved_manifest(2, preset));
  struct Ring {
    double entry0, exit0, entry1, exit1;
  };
  const std::vector<std::vector<Ring>> rings = {{{100, 900, 100, 900}, {100, 900, 100, 900}},
                                                {{100, 103, 101.5, 103.2}, {90, 95, 92, 94.5}},
                                                {{80, 83.3, 80, 83.3}, {70, 73, 71, 73}},
                                                {{100, 900, 100, 900}, {100, 900, 100, 900}}};
  std::ofstream out(dir / "timeline_events.jsonl");
  for (int64_t it = 0; it < 4; ++it) {
    TimelineIteration iteration;
    iteration.iteration = it;
    for (int64_t dp_rank = 0; dp_rank < 2; ++dp_rank) {
      for (int64_t stage = 0; stage < 2; ++stage) {
        const Ring& r = rings[static_cast<size_t>(it)][static_cast<size_t>(stage)];
        iteration.ranks.push_back(rank_with_allreduce(dp_rank * 2 + stage, dp_rank, stage,
                                                      dp_rank == 0 ? r.entry0 : r.entry1,
                                                      dp_rank == 0 ? r.exit0 : r.exit1));
      }
    }
    out << timeline_iteration_to_json(iteration).dump() << "\n";
  }
}

TEST(AllreduceFit, BandwidthFromTheMeasuredRingsByHand) {
  const fs::path dir = test::fresh_temp_dir("allreduce_fit");
  write_dp2_run(dir / "measured", false);
  // The stage's trained parameters as fp32 gradients (qwen2-test is untied, tp 1).
  const std::vector<double> bytes = [] {
    std::vector<double> b;
    for (double params : stage_trained_parameters(parse_manifest(resolved_manifest(2), "<test>"))) {
      b.push_back(4.0 * params);
    }
    return b;
  }();
  ASSERT_EQ(bytes.size(), 2u);

  std::vector<AllreduceObservation> observations = allreduce_observations(dir / "measured");
  ASSERT_EQ(observations.size(), 4u) << "2 measured iterations x 2 stages";
  const double expected_ms[] = {1.7, 3.0, 3.3, 2.0};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(observations[i].ms, expected_ms[i], 1e-9) << i;
    // n = 2: 2 (n - 1) / n x bytes sent, 2 (n - 1) = 2 latency hops.
    EXPECT_DOUBLE_EQ(observations[i].traffic.payload_bytes, bytes[i % 2]);
    EXPECT_DOUBLE_EQ(observations[i].traffic.latency_hops, 2.0);
  }

  // n = 2: payload (2 (n - 1) / n) x bytes x 8 = 8 bytes bits per ring, latency term
  // 2 (n - 1) alpha = 0.2 ms at alpha 100 us.
  const double payload_bits = 2 * 8.0 * (bytes[0] + bytes[1]);
  const double transfer_s = (1.7 + 3.0 + 3.3 + 2.0 - 4 * 0.2) / 1000.0;
  write_dp2_run(dir / "simulated", true);  // never fitted to: a model fitted to itself
  // One DP rank: each stage's all-reduce event has no ring to time.
  test::write_measured_run_folder(dir / "one_rank", false, {IterationRecord{}}, resolved_manifest(1));
  {
    TimelineIteration alone;
    alone.ranks = {rank_with_allreduce(0, 0, 0, 100, 101), rank_with_allreduce(1, 0, 1, 90, 91)};
    std::ofstream(dir / "one_rank" / "timeline_events.jsonl") << timeline_iteration_to_json(alone).dump() << "\n";
  }
  EXPECT_TRUE(allreduce_observations(dir / "one_rank").empty());
  // Tied embeddings over a pipeline (qwen2-tiny): the first and last stages' event also
  // holds the embedding's all-reduce between them; with 2 stages nothing is left.
  write_dp2_run(dir / "tied" / "run", false, "qwen2-tiny");
  EXPECT_TRUE(allreduce_observations(dir / "tied" / "run").empty());
  const AllreduceFit fit = fit_allreduce_from_results(dir, 100.0, "m.json", "$.cluster.intra_node.fit_from");
  EXPECT_NEAR(fit.bandwidth_gbps, payload_bits / transfer_s / 1e9, 1e-9 * fit.bandwidth_gbps);
  EXPECT_NEAR(fit.mean_ms, 10.0 / 4, 1e-12);
  EXPECT_EQ(fit.samples, 4);
  EXPECT_EQ(fit.runs, (std::vector<std::string>{(dir / "measured").string()}));

  // The fitted link reproduces the mean measured all-reduce of this layout.
  LinkSection link{100.0, fit.bandwidth_gbps, ""};
  const double modelled = (ring_allreduce_ms(link, 2, bytes[0]) + ring_allreduce_ms(link, 2, bytes[1])) / 2;
  EXPECT_NEAR(modelled, fit.mean_ms, 1e-9);

  EXPECT_THROW(ring_allreduce_observation(1.0, 1, 1e6), std::invalid_argument) << "a ring of one rank";
  EXPECT_THROW(ring_allreduce_observation(1.0, 2, 0), std::invalid_argument) << "nothing to transfer";
  EXPECT_THROW(fit_allreduce_bandwidth({AllreduceObservation{1.0, {}}}, 0), std::invalid_argument) << "no payload";
  try {
    fit_allreduce_from_results(dir, 2500.0, "m.json", "$.cluster.intra_node.fit_from");
    FAIL() << "alpha 2.5 ms leaves no time for the payload";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.json_path(), "$.cluster.intra_node.fit_from");
    EXPECT_NE(std::string(e.what()).find("alpha"), std::string::npos) << e.what();
  }
  fs::remove_all(dir / "measured");
  try {
    fit_allreduce_from_results(dir, 100.0, "m.json", "$.cluster.intra_node.fit_from");
    FAIL() << "only a simulated run and a one-rank run are left";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.json_path(), "$.cluster.intra_node.fit_from");
  }
  EXPECT_THROW(fit_allreduce_from_results(dir / "missing", 100.0, "m.json", "$"), ConfigError);
  fs::remove_all(dir);
}

// Tensor parallelism (tp 2, one DP rank, two stages, qwen2-test: hidden 64, 2 layers per
// stage, fp32): per measured micro-batch the mean of its TP ranks' tp_comm_ms, with the
// traffic worked out by hand from the trainer's collectives (tensor_parallel_comm_model.h).
TEST(AllreduceFit, TensorParallelCollectivesByHand) {
  const fs::path dir = test::fresh_temp_dir("allreduce_fit_tp");
  json manifest = resolved_manifest(1);
  manifest["parallelism"]["tp"] = 2;
  const Manifest parsed = parse_manifest(manifest, "<test>");
  ASSERT_EQ(parsed.parallelism.stage_layers, (std::vector<int64_t>{1, 1}));
  const int64_t hidden = parsed.model.config.hidden_size;
  std::vector<IterationRecord> records(2);
  records[0].iteration = 0;
  records[0].warmup = true;  // left out
  records[0].microbatch_tokens = {40};
  records[0].tp_comm_ms = {{500.0, 500.0}};
  records[1].iteration = 1;
  records[1].microbatch_tokens = {40, 17};
  records[1].tp_comm_ms = {{3.0, 5.0}, {1.0, 2.0}};
  test::write_measured_run_folder(dir / "tp2", false, records, manifest);
  const std::vector<AllreduceObservation> observations = allreduce_observations(dir / "tp2");
  ASSERT_EQ(observations.size(), 2u) << "one per measured micro-batch; no DP ring";
  EXPECT_DOUBLE_EQ(observations[0].ms, 4.0);
  EXPECT_DOUBLE_EQ(observations[1].ms, 1.5);
  // One layer per stage, MoBA without a floor (no attention sums), Gloo (a reduce-scatter
  // is an all-reduce: 2 gathers' worth). Gathers of [T padded, H] fp32, each sending half
  // and waiting one hop: per layer and direction 2 all-gathers + 2 reduce-scatters = 6;
  // stage 0's embedding 2 forward (reduce-scatter) + 1 backward; stage 1's head 1 forward
  // + 2 backward: 4 x 6 + 3 + 3 = 30. The loss's all-reduces (forward, last stage): [T]
  // and [2, T] fp32, each 2 gathers of half.
  for (size_t k = 0; k < 2; ++k) {
    const int64_t tokens = k == 0 ? 40 : 17;
    const double padded = k == 0 ? 40 : 18;
    const double stream = padded * static_cast<double>(hidden) * 4.0;
    const double loss = 2 * 0.5 * tokens * 4.0 + 2 * 0.5 * 2 * tokens * 4.0;
    EXPECT_DOUBLE_EQ(observations[k].traffic.payload_bytes, 30 * 0.5 * stream + loss) << k;
    EXPECT_DOUBLE_EQ(observations[k].traffic.latency_hops, 30.0 + 4.0) << k;
  }
  // The fit reproduces the mean measured time.
  const AllreduceFit fit = fit_allreduce_from_results(dir, 50.0, "m.json", "$.cluster.intra_node.fit_from");
  EXPECT_EQ(fit.samples, 2);
  EXPECT_EQ(fit.tensor_parallel_samples, 2);
  const LinkSection link{50.0, fit.bandwidth_gbps, ""};
  EXPECT_NEAR((observations[0].traffic.ms(link) + observations[1].traffic.ms(link)) / 2, fit.mean_ms, 1e-9);
  EXPECT_DOUBLE_EQ(fit.mean_ms, (4.0 + 1.5) / 2);
  // Without TP (tp 1, one DP rank) the same records give nothing to fit.
  manifest["parallelism"]["tp"] = 1;
  test::write_measured_run_folder(dir / "tp1", false, records, manifest);
  EXPECT_TRUE(allreduce_observations(dir / "tp1").empty());
  fs::remove_all(dir);
}

// The model's collectives are the trainer's: per micro-batch of the kept TP2 runs (MoBA;
// baseline and +SAB without a floor, +DST and +SAB+DST with one), the `tp_comm` events
// of each rank's timeline, counted, equal the model's calls (forward and backward).
TEST(AllreduceFit, TensorParallelCollectivesCountedAsTheTrainerRunsThem) {
  const fs::path kept = fs::path(SB_SOURCE_DIR) / "experiments" / "measured" / "cpu" / "table1-cpu-tp2";
  int64_t compared = 0;
  std::set<double> counts;
  for (const std::string run : {"baseline__seed=1", "dst__seed=1", "sab__seed=2", "sab_dst__seed=2"}) {
    SCOPED_TRACE(run);
    const Manifest m = load_manifest(kept / run / "manifest.resolved.json");
    const bool dst = m.methods.at(0).budget == BudgetKind::kDst;
    CollectiveTraffic model;
    for (int64_t s = 0; s < m.parallelism.pp; ++s) {
      const TensorParallelStage stage = tensor_parallel_stage(m, s, dst, dst);
      model += tensor_parallel_traffic(stage, 100, true);
      model += tensor_parallel_traffic(stage, 100, false);
    }
    counts.insert(model.calls);
    std::ifstream timelines(kept / run / "timeline_events.jsonl");
    std::string line;
    while (std::getline(timelines, line)) {
      const TimelineIteration iteration = timeline_iteration_from_json(json::parse(line));
      for (const RankTimeline& rank : iteration.ranks) {
        std::map<int64_t, int64_t> per_microbatch;
        for (const TimelineEvent& e : rank.events) {
          if (e.kind == EventKind::kTensorParallel) ++per_microbatch[e.microbatch];
        }
        for (const auto& [mb, events] : per_microbatch) {
          EXPECT_EQ(static_cast<double>(events), model.calls) << "iteration " << iteration.iteration << " rank "
                                                               << rank.rank << " micro-batch " << mb;
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 100);
  EXPECT_EQ(counts, (std::set<double>{38.0, 42.0})) << "qwen2-tiny: 4 layers x 8 + 6; DST's floor: 4 more";
}

TEST(AllreduceFit, CutOffTimelineLineIsNamedWithItsLine) {
  const fs::path dir = test::fresh_temp_dir("allreduce_fit_cut");
  write_dp2_run(dir, false);
  std::ofstream(dir / "timeline_events.jsonl", std::ios::app) << "{\"iteration\": 4, \"ran";
  try {
    allreduce_observations(dir);
    FAIL() << "a cut-off line must not be skipped silently";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("timeline_events.jsonl:5"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(AllreduceFit, ManifestKeyIsForTheIntraNodeLinkOnly) {
  json m = test::small_simulation_manifest_json();
  m["cluster"]["intra_node"] = {{"alpha_us", 100}, {"fit_from", "measured"}};
  const Manifest parsed = parse_manifest(m, "m.json");
  ASSERT_TRUE(parsed.cluster);
  EXPECT_EQ(parsed.cluster->intra_node.fit_from, (fs::current_path() / "measured").lexically_normal().string());
  EXPECT_EQ(cluster_section_to_json(*parsed.cluster)["intra_node"]["fit_from"],
            parsed.cluster->intra_node.fit_from);
  m["cluster"]["inter_node"] = {{"fit_from", "measured"}};
  EXPECT_EQ(test::manifest_error_path(m), "$.cluster.inter_node.fit_from");
}

TEST(AllreduceFit, SimulateUsesTheFittedBandwidth) {
  const fs::path dir = test::fresh_temp_dir("allreduce_fit_simulate");
  write_dp2_run(dir / "measured", false);
  json m = test::small_simulation_manifest_json();
  m["cluster"]["intra_node"] = {{"alpha_us", 100}, {"fit_from", (dir / "measured").string()}};
  RunManifestOptions options;
  options.manifest_file = "m.json";
  std::ostringstream log;
  const std::vector<RunSpec> runs = simulated_runs(parse_manifest(m, "m.json"), options, std::nullopt, log);
  ASSERT_FALSE(runs.empty());
  const AllreduceFit fit = fit_allreduce_from_results(dir / "measured", 100.0, "m.json", "$");
  for (const RunSpec& run : runs) {
    EXPECT_DOUBLE_EQ(run.manifest.cluster->intra_node.bandwidth_gbps, fit.bandwidth_gbps) << run.name;
  }
  EXPECT_NE(log.str().find("intra-node bandwidth fitted to 4 DP all-reduces"), std::string::npos) << log.str();
  EXPECT_EQ(log.str().find("WARNING"), std::string::npos) << "the records carry no run-queue waits";
  fs::remove_all(dir);
}

TEST(AllreduceFit, SimulateWarnsWhenFittingToAContendedRun) {
  const fs::path dir = test::fresh_temp_dir("allreduce_fit_contended");
  write_dp2_run(dir / "measured", false);
  // Its measured iterations 100 ms long with each of the 4 ranks waiting 20 ms for a
  // core: runqueue_wait_pct 20, above the report's threshold.
  {
    std::ofstream records(dir / "measured" / "records.jsonl");
    for (int64_t it = 0; it < 3; ++it) {
      IterationRecord r;
      r.iteration = it;
      r.warmup = it == 0;
      r.iter_ms = 100;
      r.runqueue_wait_ms = {20, 20, 20, 20};
      records << iteration_record_to_json(r).dump() << "\n";
    }
  }
  ASSERT_GT(kContendedRunqueueWaitPct, 0.0);
  ASSERT_LT(kContendedRunqueueWaitPct, 20.0);
  json m = test::small_simulation_manifest_json();
  m["cluster"]["intra_node"] = {{"alpha_us", 100}, {"fit_from", (dir / "measured").string()}};
  m["simulation"].erase("optimizer_ms");  // the overhead includes the optimizer step
  m["simulation"]["iteration_overhead"] = {{"fit_from", (dir / "measured").string()}};
  RunManifestOptions options;
  options.manifest_file = "m.json";
  std::ostringstream log;
  simulated_runs(parse_manifest(m, "m.json"), options, std::nullopt, log);
  const std::string text = log.str();
  const std::string warning = "WARNING: fitting to " + (dir / "measured").string() + ", whose ranks waited 20.0%";
  ASSERT_NE(text.find(warning), std::string::npos) << text;
  EXPECT_EQ(text.find(warning, text.find(warning) + 1), std::string::npos) << "once per run, not once per fit";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sb
