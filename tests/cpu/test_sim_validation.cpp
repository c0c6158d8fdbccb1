// `simulate --validate-against`: per-run and per-method errors between a simulated and a
// measured results folder, on hand-built folders (tests/cpu/report_fixture.h: a run of
// median m has measured iter_ms m - 10, m, m + 30 and bubble fractions 0.1, 0.2, 0.3).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "common/errors.h"
#include "harness/sim/sim_validation.h"
#include "tests/cpu/report_fixture.h"
#include "tests/support/run_command.h"

namespace sb {
namespace {

namespace fs = std::filesystem;

TEST(SimValidation, PerRunErrorsAndPerMethodMediansOverSeeds) {
  const fs::path root = test::fresh_temp_dir("sim_validation");
  const fs::path measured = root / "measured", simulated = root / "simulated";
  for (const auto& [name, seed, real_ms, sim_ms] :
       {std::tuple{"base__seed=1", 1, 400.0, 440.0}, std::tuple{"base__seed=2", 2, 500.0, 450.0},
        std::tuple{"base__seed=3", 3, 900.0, 600.0}, std::tuple{"sab__seed=1", 1, 300.0, 300.0}}) {
    const std::string method = std::string(name).substr(0, std::string(name).find("__"));
    test::write_fixture_run(measured / name, {name, method, {{"seed", seed}}, real_ms});
    test::FixtureRun sim{name, method, {{"seed", seed}}, sim_ms};
    sim.simulated = true;
    // The simulated seed 1 computes 10 % more than the measured one: a profile timed on a
    // slower moment of the machine.
    if (std::string(name) == "base__seed=1") sim.compute_scale = 1.1;
    test::write_fixture_run(simulated / name, sim);
  }
  // A simulated run with no measured counterpart is listed, not compared.
  test::FixtureRun lonely{"lbb__seed=1", "lbb", {{"seed", 1}}, 200.0};
  lonely.simulated = true;
  test::write_fixture_run(simulated / "lbb__seed=1", lonely);

  const nlohmann::json v = validate_simulation(simulated, measured);
  ASSERT_EQ(v.at("runs").size(), 4u);
  EXPECT_EQ(v.at("runs_without_measurement"), "lbb__seed=1");
  const auto run = [&](const std::string& name) {
    for (const auto& r : v.at("runs")) {
      if (r.at("run") == name) return r;
    }
    ADD_FAILURE() << name;
    return nlohmann::json();
  };
  EXPECT_NEAR(run("base__seed=1")["median_iter_ms"]["relative_error"].get<double>(), 0.10, 1e-12);
  EXPECT_NEAR(run("base__seed=2")["median_iter_ms"]["relative_error"].get<double>(), -0.10, 1e-12);
  EXPECT_NEAR(run("base__seed=1")["mean_bubble_fraction"]["measured"].get<double>(), 0.2, 1e-12);
  // At the measured speed: 440 x (1 / 1.1) = 400, no error left; seed 2 computed alike: -10 % stays.
  EXPECT_NEAR(run("base__seed=1")["median_iter_ms"]["compute_ratio"].get<double>(), 1 / 1.1, 1e-12);
  EXPECT_NEAR(run("base__seed=1")["median_iter_ms"]["relative_error_at_measured_speed"].get<double>(), 0.0, 1e-12);
  EXPECT_NEAR(run("base__seed=2")["median_iter_ms"]["relative_error_at_measured_speed"].get<double>(), -0.10, 1e-12);
  // Per method: the medians over seeds (not the means), 450 simulated against 500 measured.
  ASSERT_EQ(v.at("methods").size(), 2u);
  const nlohmann::json& base = v.at("methods")[0];
  EXPECT_EQ(base.at("method"), "base");
  EXPECT_EQ(base.at("runs"), 3);
  EXPECT_NEAR(base["median_iter_ms"]["simulated"].get<double>(), 450.0, 1e-9);
  EXPECT_NEAR(base["median_iter_ms"]["measured"].get<double>(), 500.0, 1e-9);
  EXPECT_NEAR(base["median_iter_ms"]["relative_error"].get<double>(), -0.1, 1e-12);
  // Medians over seeds at the measured speed: 400, 450, 600 -> 450 against 500.
  EXPECT_NEAR(base["median_iter_ms"]["at_measured_speed"].get<double>(), 450.0, 1e-9);
  EXPECT_NEAR(base["mean_bubble_fraction"]["absolute_error"].get<double>(), 0.0, 1e-12);
  EXPECT_EQ(v.at("methods")[1].at("method"), "sab");
  EXPECT_TRUE(fs::exists(simulated / "validation.json"));
  const std::string text = validation_to_text(v);
  EXPECT_NE(text.find("| base | 3 | 450.00 | 500.00 | -10.0% | -10.0% |"), std::string::npos) << text;
  EXPECT_NE(text.find("| base__seed=1 | 440.00 | 400.00 | +10.0% | 0.909 | +0.0% |"), std::string::npos) << text;

  EXPECT_THROW(validate_simulation(simulated, root / "absent"), ConfigError);
  fs::remove_all(root);
}

}  // namespace
}  // namespace sb
