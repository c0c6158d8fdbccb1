#pragma once
// The simulator's first plan of a one-DP-rank run against the real trainer's (which trains
// the run's model with the run's attention backend on the CPU): the same samples, budgets
// and predicted times per micro-batch. Later plans learn from what the layers report, so
// only the first must agree.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "harness/config/manifest.h"
#include "harness/sim/run_simulator.h"
#include "harness/train/trainer.h"
#include "tests/support/small_simulation.h"

namespace sb::test {

// manifest: parallelism.dp must be 1 (the one-process trainer plans for one DP rank).
inline void expect_first_plan_equals_the_trainers(const nlohmann::json& manifest, const std::string& what) {
  RunSpec run = expand_runs(parse_manifest(manifest, "<test>")).at(0);
  RunSimulator sim = simulator_of(run.manifest);
  TrainerOptions options;
  options.predictor = sim.profile().predictor;
  const Qwen2Config& config = qwen2_preset(run.manifest.model.preset);
  Trainer trainer(run, RankContext::single_process(ParallelLayout(1, 1, config.num_hidden_layers), c10::kCPU),
                  options);
  const GlobalBatchPlan real = trainer.compute_gradients(0).plan;
  const GlobalBatchPlan simulated = sim.simulate_iteration(0).plan;
  ASSERT_EQ(real.ranks.size(), simulated.ranks.size()) << what;
  for (size_t r = 0; r < real.ranks.size(); ++r) {
    ASSERT_EQ(real.ranks[r].size(), simulated.ranks[r].size()) << what;
    for (size_t k = 0; k < real.ranks[r].size(); ++k) {
      EXPECT_EQ(real.ranks[r][k].samples, simulated.ranks[r][k].samples) << what;
      EXPECT_EQ(real.ranks[r][k].budget, simulated.ranks[r][k].budget) << what;
      EXPECT_EQ(real.ranks[r][k].sequence_budgets, simulated.ranks[r][k].sequence_budgets) << what;
      EXPECT_EQ(real.ranks[r][k].predicted_ms, simulated.ranks[r][k].predicted_ms) << what;
    }
  }
}

}  // namespace sb::test
