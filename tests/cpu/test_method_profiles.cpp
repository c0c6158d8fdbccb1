// Latency profiles named by methods: the default grid `run` measures on first use, the
// check that a profile belongs to the run, and the message under torchrun.
#include <gtest/gtest.h>

#include <sstream>

#include "common/errors.h"
#include "harness/latency/analytic_profile.h"
#include "harness/latency/run_profiles/method_profiles.h"
#include "models/qwen2/qwen2_config.h"
#include "tests/support/run_command.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A one-method manifest: qwen2-test, MoBA blocks of 32, top_k 4, the given budget
// policy, lengths 40..500, profile at `profile`.
Manifest manifest_with(const std::string& budget, const fs::path& profile, const std::string& device = "cpu") {
  json j = {{"name", "m"},
            {"model", {{"preset", "qwen2-test"}}},
            {"data",
             {{"source", "synthetic"},
              {"synthetic",
               {{"length_mixture", json::array({{{"weight", 1.0}, {"min_tokens", 40}, {"max_tokens", 500}}})}}}}},
            {"train", {{"device", device}, {"iterations", 4}, {"max_tokens_per_microbatch", 512}}},
            {"methods",
             json::array({{{"name", "x"},
                           {"attention", {{"name", "moba"}, {"block_size", 32}, {"top_k", 4}}},
                           {"batching", "sab"},
                           {"budget", budget},
                           {"profile", profile.string()}}})}};
  return parse_manifest(j, "<test>");
}

TEST(MethodProfiles, DefaultGridSpansTheDataAndTheBudgetsThePoliciesAsk) {
  const Manifest m = manifest_with("dst", "/tmp/unused.json");
  const ProfileRequest request = default_profile_request(m, m.methods[0], 500);
  // Lengths double from max(16, 512 / 128) to the first power of two >= 500.
  EXPECT_EQ(request.seq_lens, (std::vector<int64_t>{16, 32, 64, 128, 256, 512}));
  // Budgets double from 1 to the 16 blocks of 500 tokens; top_k 4 and k_max 8 included.
  EXPECT_EQ(request.budgets, (std::vector<int64_t>{1, 2, 4, 8, 16}));
  EXPECT_EQ(request.preset, "qwen2-test");
  EXPECT_EQ(request.attention.block_size, 32);
  EXPECT_EQ(request.device, "cpu");

  // Long data: at most 8 lengths, the shortest dropped; odd budgets kept exactly.
  Manifest wide = manifest_with("fixed", "/tmp/unused.json");
  wide.methods[0].attention.top_k = 5;
  const ProfileRequest r2 = default_profile_request(wide, wide.methods[0], 100000);
  EXPECT_EQ(r2.seq_lens.size(), 8u);  // 1024 .. 131072 (131072 / 128 = 1024)
  EXPECT_EQ(r2.seq_lens.front(), 1024);
  EXPECT_EQ(r2.seq_lens.back(), 131072);
  EXPECT_NE(std::find(r2.budgets.begin(), r2.budgets.end(), 5), r2.budgets.end());
  EXPECT_EQ(r2.budgets.back(), (100000 + 31) / 32);
}

TEST(MethodProfiles, CommandLineMeasuresTheSameGrid) {
  const Manifest m = manifest_with("fixed", "/tmp/p.json");
  const ProfileRequest request = default_profile_request(m, m.methods[0], 500);
  EXPECT_EQ(profile_command_line(request, "/tmp/p.json"),
            "sparsebalance profile --model qwen2-test --attention moba --block 32 --device cpu --precision fp32 "
            "--seq-lens 16,32,64,128,256,512 --budgets 1,2,4,8,16 --out /tmp/p.json");
  // Warm-up and repetitions other than the defaults are part of the command.
  ProfileRequest more = request;
  more.warmup = 3;
  more.repetitions = 10;
  const std::string line = profile_command_line(more, "/tmp/p.json");
  EXPECT_NE(line.find(" --budgets 1,2,4,8,16 --warmup 3 --repetitions 10 --out /tmp/p.json"), std::string::npos) << line;
  // The threads the profile is measured with (a rank's, on first use) too.
  const std::string threaded = profile_command_line(more, "/tmp/p.json", 2);
  EXPECT_NE(threaded.find(" --repetitions 10 --threads 2 --out /tmp/p.json"), std::string::npos) << threaded;
}

LatencyProfile analytic_for(const std::string& preset, int64_t block) {
  return make_analytic_profile(qwen2_preset(preset), "moba", block, {64, 128}, {1, 2}, device_throughput_preset("h200"));
}

TEST(MethodProfiles, ProfileOfAnotherSetupIsRefusedNamingWhatDiffers) {
  const Manifest m = manifest_with("fixed", "/tmp/p.json");
  LatencyProfile ok = analytic_for("qwen2-test", 32);
  ok.device = "cpu";
  EXPECT_NO_THROW(check_profile_matches(ok, m, m.methods[0], "$.methods[0].profile"));

  auto expect_refused = [&](const LatencyProfile& p, const std::string& words) {
    try {
      check_profile_matches(p, m, m.methods[0], "$.methods[0].profile");
      ADD_FAILURE() << "accepted a profile that differs in " << words;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("$.methods[0].profile"), std::string::npos) << e.what();
    }
  };
  LatencyProfile other_model = analytic_for("qwen2-tiny", 32);
  other_model.device = "cpu";
  expect_refused(other_model, "qwen2-tiny");
  LatencyProfile other_block = analytic_for("qwen2-test", 64);
  other_block.device = "cpu";
  expect_refused(other_block, "blocks of 64");
  LatencyProfile on_gpu = ok;
  on_gpu.device = "cuda";
  expect_refused(on_gpu, "measured on cuda");
}

TEST(MethodProfiles, WarnsWhenAPackingRunUsesAProfileWithoutThePackedPoint) {
  Manifest m = manifest_with("fixed", "/tmp/p.json");  // no sample limit: micro-batches pack
  LatencyProfile old = analytic_for("qwen2-test", 32);
  old.kind = "measured";
  const std::string warning = packed_point_warning(old, m, "/tmp/p.json");
  EXPECT_NE(warning.find("/tmp/p.json has no packed micro-batch point"), std::string::npos) << warning;
  EXPECT_NE(warning.find("Delete the file"), std::string::npos) << warning;
  LatencyProfile current = old;
  current.packed_ms = latency_stat_from_samples({1.0});
  current.packed_count = 4;
  EXPECT_EQ(packed_point_warning(current, m, "/tmp/p.json"), "");
  EXPECT_EQ(packed_point_warning(analytic_for("qwen2-test", 32), m, "/tmp/p.json"), "") << "analytic: nothing to measure";
  m.train.max_samples_per_microbatch = 1;  // one sequence per micro-batch: the point is never used
  EXPECT_EQ(packed_point_warning(old, m, "/tmp/p.json"), "");
}

TEST(MethodProfiles, MissingProfileUnderTorchrunSaysHowToMeasureIt) {
  const fs::path dir = test::fresh_temp_dir("method_profiles_missing");
  const Manifest m = manifest_with("fixed", dir / "p.json");
  const std::vector<RunSpec> runs = expand_runs(m);
  std::ostringstream log;
  try {
    ensure_method_profiles(runs, false, log);
    ADD_FAILURE() << "a missing profile was accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("does not exist"), std::string::npos) << what;
    EXPECT_NE(what.find("sparsebalance profile --model qwen2-test"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(dir / "p.json"));
  fs::remove_all(dir);
}

TEST(MethodProfiles, MissingProfileIsMeasuredOnceThenReused) {
  const fs::path dir = test::fresh_temp_dir("method_profiles_measure");
  Manifest m = manifest_with("fixed", dir / "sub" / "p.json");
  // A short grid: lengths 40..60 -> seq_lens 16, 32, 64 and budgets 1, 2, 4.
  m.data.synthetic.length_mixture = {{1.0, 40, 60}};
  const std::vector<RunSpec> runs = expand_runs(m);
  std::ostringstream log;
  ensure_method_profiles(runs, true, log);
  ASSERT_TRUE(fs::exists(dir / "sub" / "p.json")) << log.str();
  EXPECT_NE(log.str().find("measuring the latency profile"), std::string::npos);
  const LatencyProfile measured = load_latency_profile(dir / "sub" / "p.json");
  EXPECT_EQ(measured.seq_lens, (std::vector<int64_t>{16, 32, 64}));
  // The whole model was timed too, at the method's k0 (4, on the grid), once per length.
  ASSERT_EQ(measured.model_ms.size(), 3u);
  EXPECT_EQ(measured.model_budget, 4);
  for (const LatencyStat& s : measured.model_ms) EXPECT_GT(s.median, 0.0);
  EXPECT_EQ(measured.budgets, (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(measured.kind, "measured");
  EXPECT_EQ(measured.context["measured_for"]["method"], "x");

  std::ostringstream again;
  ensure_method_profiles(runs, true, again);
  EXPECT_EQ(again.str().find("measuring"), std::string::npos) << again.str();
  ASSERT_NE(load_method_predictor(runs[0]), nullptr);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sb
