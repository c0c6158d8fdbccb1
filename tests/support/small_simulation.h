#pragma once
// A small manifest the simulator tests share (DP2 x PP2, qwen2-test, MoBA, SAB planning
// on an analytic profile, optimizer_ms 0, two length modes) and the simulator of one of
// its runs, timing the planner at 0 ms so that records compare exactly.

#include <nlohmann/json.hpp>

#include <optional>

#include "harness/config/manifest.h"
#include "harness/sim/run_simulator.h"
#include "harness/sim/sim_runner.h"

namespace sb::test {

inline nlohmann::json small_simulation_manifest_json() {
  return nlohmann::json::parse(R"({
    "name": "smallsim", "seed": 9,
    "model": {"preset": "qwen2-test"},
    "data": {"synthetic": {"length_mixture": [{"weight": 0.6, "min_tokens": 8, "max_tokens": 24},
                                              {"weight": 0.4, "min_tokens": 40, "max_tokens": 64}]}},
    "parallelism": {"dp": 2, "pp": 2},
    "train": {"iterations": 3, "warmup_iterations": 1, "global_batch_size": 8,
              "max_tokens_per_microbatch": 64, "threads": 1},
    "cluster": {"preset": "h200"},
    "simulation": {"profile": {"analytic": {"device": "h200"}}, "optimizer_ms": 0},
    "method_defaults": {"attention": {"name": "moba", "block_size": 8, "top_k": 2}},
    "methods": [{"name": "x", "preset": "sab"}]
  })");
}

// The simulator of one run's manifest (longest sample: 64 tokens).
inline RunSimulator simulator_of(const Manifest& m) {
  RunSimulatorOptions o;
  o.fixed_plan_ms = 0;
  return RunSimulator(m, load_sim_profile(m, 64, std::nullopt), simulation_cluster(m), o);
}

// The simulator of the manifest's first run.
inline RunSimulator simulator_of(const nlohmann::json& manifest) {
  return simulator_of(expand_runs(parse_manifest(manifest, "<test>")).at(0).manifest);
}

}  // namespace sb::test
