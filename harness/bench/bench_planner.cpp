// The SparseBalance planner (SAB packing + two-stage LPT, DST's budget search, the
// predictor's lookups) timed on the kept simulator manifest at cluster scale:
// experiments/sim/table1-h200.json (Qwen2.5-3B shapes, MoBA block 256 top-k 32, the
// analytic H200 profile, pp 4 x tp 2), method sab_dst, with dp and the global batch set
// per benchmark. Each benchmark first simulates two iterations so that the planner's
// estimators hold what a running job's hold, then times plan() on the third batch.
//
//   build/harness/bench/sb_bench_planner --benchmark_filter=Plan/
//   ranks = dp x 8; the name's arguments are dp and the sequences per global batch.
//
// The scaling table in docs/planner_scaling.md comes from scripts/planner_scaling.sh,
// which runs this binary over the grid.

#include <benchmark/benchmark.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "harness/config/manifest.h"
#include "harness/config/manifest_overrides.h"
#include "harness/data/dataset.h"
#include "harness/latency/run_profiles/sim_profile.h"
#include "harness/runner/run_manifest.h"
#include "harness/sim/run_simulator.h"
#include "harness/sim/sim_runner.h"

namespace sb {
namespace {

struct WarmPlanner {
  std::unique_ptr<RunSimulator> sim;
  std::vector<int64_t> lengths;  // the batch plan() is timed on
};

WarmPlanner warm_planner(int64_t dp, int64_t sequences) {
  const std::string manifest_file = std::string(SB_SOURCE_DIR) + "/experiments/sim/table1-h200.json";
  const std::vector<std::string> sets = {"parallelism.dp=" + std::to_string(dp), "parallelism.tp=2",
                                         "train.global_batch_size=" + std::to_string(sequences),
                                         "train.iterations=3", "train.warmup_iterations=1"};
  const Manifest manifest = load_manifest(manifest_file, parse_manifest_overrides(sets));
  RunManifestOptions selection;
  selection.manifest_file = manifest_file;
  selection.only = "sab_dst";
  std::ostringstream quiet;
  const Manifest m = simulated_runs(manifest, selection, std::nullopt, quiet).at(0).manifest;
  const int64_t longest = make_dataset(m.data, m.seed, dataset_limits(m))->max_length();
  WarmPlanner warm;
  warm.sim = std::make_unique<RunSimulator>(m, load_sim_profile(m, longest, std::nullopt), simulation_cluster(m),
                                            RunSimulatorOptions{/*fixed_plan_ms=*/0});
  for (int64_t it = 0; it < 2; ++it) warm.sim->simulate_iteration(it);
  warm.lengths = make_dataset(m.data, m.seed, dataset_limits(m))->global_batch_shape(2, sequences).lengths;
  return warm;
}

void Plan(benchmark::State& state) {
  const int64_t dp = state.range(0), sequences = state.range(1);
  WarmPlanner warm = warm_planner(dp, sequences);
  size_t microbatches = 0;
  for (auto _ : state) {
    GlobalBatchPlan plan = warm.sim->planner().plan(warm.lengths);
    microbatches = 0;
    for (const auto& rank : plan.ranks) microbatches += rank.size();
    benchmark::DoNotOptimize(plan);
  }
  state.counters["ranks"] = static_cast<double>(dp * 8);
  state.counters["sequences"] = static_cast<double>(sequences);
  state.counters["microbatches"] = static_cast<double>(microbatches);
}

// The three scales: one node (8 ranks, 16 sequences, the manifest's own layout), 512
// ranks with 1,024 sequences, and 16,384 ranks with 16,384 sequences.
BENCHMARK(Plan)->Args({1, 16})->Args({64, 1024})->Args({2048, 16384})->Unit(benchmark::kMillisecond);

// The scaling grid of docs/planner_scaling.md: 8 to 16,384 ranks (dp 1 to 2,048), 2, 8
// and 32 sequences per DP rank (2 to 65,536 sequences).
void PlanScaling(benchmark::State& state) { Plan(state); }
BENCHMARK(PlanScaling)
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int64_t dp : {1, 8, 64, 512, 2048}) {
        for (int64_t per_rank : {2, 8, 32}) b->Args({dp, dp * per_rank});
      }
    })
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sb

int main(int argc, char** argv) {
#ifdef NDEBUG
  benchmark::AddCustomContext("sb_build", "optimized (NDEBUG)");
#else
  std::fprintf(stderr, "***WARNING*** sb_bench_planner was built without NDEBUG: timings are not representative.\n");
  benchmark::AddCustomContext("sb_build", "DEBUG (NDEBUG not defined)");
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
