// The simulator against runs measured for real that the repository keeps
// (experiments/measured/): each *-sim.json twin fits the coverage exponent, the latency
// noise and the iteration overhead to one invocation of its measured manifest and is
// checked here against another invocation it was not fitted to. The bounds are what the
// simulator is shown to meet (docs/simulator.md); a change that moves a figure past one
// is a change of the model to explain, not a threshold to relax.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/common/atomic_file.h"
#include "tests/support/run_command.h"

namespace sb {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// `simulate experiments/sim/<sim_manifest>.json --validate-against experiments/measured/<against>`
// into `out`; returns validation.json.
json validate_kept(const fs::path& out, const std::string& sim_manifest, const std::string& against) {
  const std::string source = SB_SOURCE_DIR;
  const test::CommandResult r =
      test::run_command(test::sparsebalance_binary() + " simulate " + source + "/experiments/sim/" + sim_manifest +
                        ".json --results " + out.string() + " --validate-against " + source + "/experiments/measured/" +
                        against + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return json::parse(read_file(out / sim_manifest / "validation.json"));
}

// One error figure of a method's row in validation.json.
double validation_error(const json& method, const char* figure, const char* which = "relative_error") {
  return method.at(figure).at(which).get<double>();
}

TEST(SimulatorAgainstTheH100, HeldOutInvocationPerMethod) {
  // experiments/sim/table1-gpu1-sim.json fits the coverage exponent, the latency noise and
  // the iteration overhead to one invocation of table1-gpu1 measured on an H100; the
  // other invocation (same manifest, same profile, minutes later) was not fitted to.
  // Per method: median iteration time within 10 %; mean bubble fraction (here almost all
  // of it the iteration overhead, which itself moves by 20-30 % between runs of one
  // invocation) within 25 %: without the fitted overhead it is 82-86 % low.
  const fs::path out = test::fresh_temp_dir("sim_vs_h100");
  const std::string source = SB_SOURCE_DIR;
  const json v = validate_kept(out, "table1-gpu1-sim", "h100/table1-gpu1-rerun");
  ASSERT_EQ(v.at("methods").size(), 4u) << v.dump(2);
  for (const json& method : v.at("methods")) {
    SCOPED_TRACE(method.dump());
    EXPECT_LT(std::abs(validation_error(method, "median_iter_ms")), 0.10);
    EXPECT_LT(std::abs(validation_error(method, "mean_bubble_fraction")), 0.25);
  }
  // --bench simulates with the same fitted values: its baseline iteration 1 is the record's.
  const test::CommandResult bench = test::run_command(test::sparsebalance_binary() + " simulate " + source +
                                                      "/experiments/sim/table1-gpu1-sim.json --bench "
                                                      "--bench-iterations 2 --only baseline 2>&1");
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  EXPECT_NE(bench.output.find("iteration overhead fitted"), std::string::npos) << bench.output;
  std::ifstream records(out / "table1-gpu1-sim" / "baseline" / "records.jsonl");
  std::string line;
  std::getline(records, line);
  std::getline(records, line);
  // The bench row "| baseline | 1 (1 x 1 x 1 x 1) | <micro-batches> | <iteration ms> |": the
  // same iteration as the record's, up to the planner's wall-clock time, which each
  // simulation measures afresh (microseconds), so not compared digit for digit.
  const json record = json::parse(line);
  char prefix[64];
  std::snprintf(prefix, sizeof(prefix), "| baseline | 1 (1 x 1 x 1 x 1) | %zu | ", record.at("microbatch_ms").size());
  const size_t row = bench.output.find(prefix);
  ASSERT_NE(row, std::string::npos) << prefix << "\n" << bench.output;
  const double bench_ms = std::stod(bench.output.substr(row + std::strlen(prefix)));
  EXPECT_NEAR(bench_ms, record.at("iter_ms").get<double>(), 0.2) << bench.output;
  fs::remove_all(out);
}

TEST(SimulatorAgainstTheCpu, HeldOutInvocationPerMethod) {
  // experiments/sim/table1-cpu-sim.json fits to one invocation of table1-cpu measured on
  // this kind of machine (2 cores, DP2 over Gloo, nothing else running: its ranks waited
  // 1.8-3.2 % of their time for a core); the other invocation ran right after it, from the
  // same build. Per method (median of the 2 seeds), as issue 9 asks: iteration time (as
  // simulated, and at the measured run's compute speed) and mean bubble fraction within
  // 10 %. Held out, at the commit that added this test: iteration time -2.1 .. +3.6 %,
  // bubble -1.6 .. +7.9 % (the balanced runs wait 0.022-0.033 of the iteration).
  const fs::path out = test::fresh_temp_dir("sim_vs_cpu");
  const json v = validate_kept(out, "table1-cpu-sim", "cpu/table1-cpu-rerun");
  ASSERT_EQ(v.at("methods").size(), 6u) << v.dump(2);
  for (const json& method : v.at("methods")) {
    SCOPED_TRACE(method.dump());
    EXPECT_LT(std::abs(validation_error(method, "median_iter_ms")), 0.10);
    EXPECT_LT(std::abs(validation_error(method, "median_iter_ms", "relative_error_at_measured_speed")), 0.10);
    EXPECT_LT(std::abs(validation_error(method, "mean_bubble_fraction")), 0.10);
  }
  fs::remove_all(out);
}

TEST(SimulatorAgainstTheCpu, VerticalSlashHeldOutInvocationPerMethod) {
  // experiments/sim/table1-vs-cpu-sim.json fits the vertical-slash pattern model (Zipf
  // exponent and the top_k rule's keys), the latency noise, the iteration overhead and the
  // all-reduce to the first invocation of table1-vs-cpu (5c242d9) and is checked against a
  // second one, a day later on the same kind of machine (ranks waited 2.4-3.8 % of their
  // time for a core). Against the profile the second ran with (the simulation's), the
  // first computed 1.13-1.31x, the second 0.90-1.03x: the raw iteration time carries that
  // drift (held out:
  // -3.5 .. +12.5 % per method),
  // at the measured speed it is -3.4 .. +2.4 %. The mean bubble fraction of the
  // data-order methods (0.16-0.18) within 5 % (seen: -0.2 .. +3.5 %); the balanced ones
  // wait 0.02-0.04 of the iteration, where one hundredth is 25-50 % of it: compared
  // absolutely (seen: +0.005 .. +0.010).
  const fs::path out = test::fresh_temp_dir("sim_vs_cpu_vertical_slash");
  const json v = validate_kept(out, "table1-vs-cpu-sim", "cpu/table1-vs-cpu-rerun");
  ASSERT_EQ(v.at("methods").size(), 7u) << v.dump(2);
  for (const json& method : v.at("methods")) {
    SCOPED_TRACE(method.dump());
    EXPECT_LT(std::abs(validation_error(method, "median_iter_ms")), 0.15);
    EXPECT_LT(std::abs(validation_error(method, "median_iter_ms", "relative_error_at_measured_speed")), 0.05);
    const json& bubble = method.at("mean_bubble_fraction");
    if (bubble.at("measured").get<double>() > 0.1) {
      EXPECT_LT(std::abs(validation_error(method, "mean_bubble_fraction")), 0.05);
    } else {
      EXPECT_LT(std::abs(validation_error(method, "mean_bubble_fraction", "absolute_error")), 0.015);
    }
  }
  fs::remove_all(out);
}

// A TP 2 twin's held-out check: per method, iteration time within 10 % (raw and at the
// measured speed) and the mean bubble within 0.01, compared absolutely (it is near 0.01).
void expect_tensor_parallel_twin_held_out(const std::string& out_name, const std::string& simulation,
                                          const std::string& measured) {
  const fs::path out = test::fresh_temp_dir(out_name);
  const json v = validate_kept(out, simulation, measured);
  ASSERT_EQ(v.at("methods").size(), 4u) << v.dump(2);
  for (const json& method : v.at("methods")) {
    SCOPED_TRACE(method.dump());
    EXPECT_LT(std::abs(validation_error(method, "median_iter_ms")), 0.10);
    EXPECT_LT(std::abs(validation_error(method, "median_iter_ms", "relative_error_at_measured_speed")), 0.10);
    EXPECT_LT(std::abs(validation_error(method, "mean_bubble_fraction", "absolute_error")), 0.01);
  }
  fs::remove_all(out);
}

TEST(SimulatorAgainstTheCpu, TensorParallelHeldOutInvocationPerMethod) {
  // experiments/sim/table1-cpu-tp2-sim.json (TP2: one stage, one DP rank) fits the
  // intra-node link to the first invocation's TP collectives (tp_comm_ms against the
  // trainer's collectives, tensor_parallel_comm_model.h), and the coverage exponent, the
  // latency noise and the iteration overhead too, and is checked against the second
  // invocation, run right after it from the same build with the same profile. Both
  // contended: each TP collective waits for cores (ranks waited 41-49 % of their time), so
  // the fitted link (2.5 Gbit/s) stands for Gloo on this machine. Per method, held out:
  // iteration time -1.9 .. +2.5 % (at the measured speed -3.9 .. +2.8 %); the mean bubble
  // (no DP wait, no pipeline: 0.010 measured) 0.004 below, compared absolutely.
  expect_tensor_parallel_twin_held_out("sim_vs_cpu_tp2", "table1-cpu-tp2-sim", "cpu/table1-cpu-tp2-rerun");
}

TEST(SimulatorAgainstTheCpu, TensorParallelWithAProfileTimedWithItsCollectivesHeldOut) {
  // experiments/sim/table1-cpu-tp2-collectives-sim.json: the same layout with the profile
  // its two TP ranks timed together, Gloo collectives included, so the simulator adds no
  // modelled TP traffic to it. Fitted to the first invocation (coverage, noise, overhead),
  // checked against the second, both from one build with that profile. Per method, held
  // out: iteration time -6.1 .. +1.0 % (at the measured speed -3.5 .. -0.7 %); the mean
  // bubble (0.010-0.011 measured) 0.004-0.005 below, compared absolutely.
  expect_tensor_parallel_twin_held_out("sim_vs_cpu_tp2_collectives", "table1-cpu-tp2-collectives-sim",
                                       "cpu/table1-cpu-tp2-collectives-rerun");
}

TEST(SimulatorAgainstTheCpu, VerticalSlashUnderContextParallelismHeldOut) {
  // experiments/sim/mtraining-cp2-cpu-sim.json fits the ring compute factors, the
  // vertical-slash pattern model (its spread to the rerun's per-rank kept pairs), the
  // iteration overhead and the all-reduce to the rerun of mtraining-cp2-cpu (the
  // invocation with timelines, profiles measured right after it) and is checked against
  // the first invocation. That one took 1.18-1.77x the compute time the rerun's profiles
  // predict (both ran CP ranks on 2 cores: the first's waited 12-24 % of their time for a
  // core, the rerun's 13-31 %), so the raw iteration time carries the drift (-29 .. -40 %
  // per method) and is not bounded here;
  // at the measured speed every method is within 5 % (seen: -1.1 .. +4.1 %). Per run, the
  // worker imbalance by work within 3 % (seen: -2.4 .. +1.5 %) and by time within 8 %
  // (seen: -6.3 .. 0 %, MoBA contiguous the largest) for every pattern and layout.
  const fs::path out = test::fresh_temp_dir("sim_mtraining_cp2_cpu");
  const json v = validate_kept(out, "mtraining-cp2-cpu-sim", "cpu/mtraining-cp2-cpu");
  ASSERT_EQ(v.at("methods").size(), 4u) << v.dump(2);
  for (const json& method : v.at("methods")) {
    SCOPED_TRACE(method.dump());
    EXPECT_LT(std::abs(validation_error(method, "median_iter_ms", "relative_error_at_measured_speed")), 0.05);
  }
  ASSERT_EQ(v.at("runs").size(), 12u);
  for (const json& run : v.at("runs")) {
    SCOPED_TRACE(run.dump());
    EXPECT_LT(std::abs(validation_error(run, "median_cp_work_imbalance")), 0.03);
    EXPECT_LT(std::abs(validation_error(run, "median_cp_worker_imbalance")), 0.08);
  }
  fs::remove_all(out);
}

}  // namespace
}  // namespace sb
