// The runner's pieces without training: what a rerun does with an existing run
// folder, fault-injection parsing, and the local launcher on small shell programs
// (prefixed output, first failure stops the rest, exit codes).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/config/stored_manifest.h"
#include "harness/patterns/attention_patterns.h"
#include "harness/runner/fault_injection.h"
#include "harness/runner/local_launcher.h"
#include "harness/runner/run_folder.h"
#include "harness/runner/run_manifest.h"
#include "tests/support/run_command.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const json kManifest = {{"name", "m"}, {"train", {{"lr", 0.1}}}, {"description", "a"}};

fs::path make_run(const fs::path& root, bool complete, const json& manifest, bool checkpoint) {
  const fs::path run = root / "dense";
  fs::create_directories(run);
  write_file_atomic(run / "manifest.resolved.json", manifest.dump());
  write_file_atomic(run / "context.json", "{}");
  write_file_atomic(run / "records.jsonl",
                    "{\"iteration\": 0}\n{\"iteration\": 1}\n{\"iteration\": 2}\n{\"iteration\": 3, \"lo");
  if (complete) write_file_atomic(run / "status.json", R"({"state": "complete"})");
  if (checkpoint) {
    fs::create_directories(run / "checkpoints" / "iter_00000002");
    write_file_atomic(run / "checkpoints" / "iter_00000002" / "trainer_state.json", R"({"iterations_done": 2})");
    write_file_atomic(run / "checkpoints" / "latest", "iter_00000002\n");
  }
  return run;
}

TEST(RunFolder, RerunDecisions) {
  const fs::path root = test::fresh_temp_dir("run_folder");
  EXPECT_EQ(decide_run(root / "dense", kManifest, false, "m.json").disposition, Disposition::kFresh);

  make_run(root, true, kManifest, false);
  json described = kManifest;
  described["description"] = "changed text only";
  EXPECT_EQ(decide_run(root / "dense", described, false, "m.json").disposition, Disposition::kSkip);
  json changed = kManifest;
  changed["train"]["lr"] = 0.2;
  try {
    decide_run(root / "dense", changed, false, "m.json");
    FAIL() << "a changed manifest must not reuse complete results";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.json_path(), "/train/lr");
  }
  EXPECT_EQ(decide_run(root / "dense", changed, true, "m.json").disposition, Disposition::kReplaceComplete);

  fs::remove_all(root / "dense");
  make_run(root, false, kManifest, true);
  const RunDecision resume = decide_run(root / "dense", kManifest, false, "m.json");
  EXPECT_EQ(resume.disposition, Disposition::kResume);
  EXPECT_EQ(resume.resume_iteration, 2);
  EXPECT_EQ(decide_run(root / "dense", changed, false, "m.json").disposition, Disposition::kRestartIncomplete);
  EXPECT_EQ(decide_run(root / "dense", kManifest, true, "m.json").disposition, Disposition::kRestartIncomplete);
  EXPECT_EQ(run_decision_from_json(run_decision_to_json(resume)).checkpoint, resume.checkpoint);

  fs::remove_all(root / "dense");
  make_run(root, false, kManifest, false);
  const RunDecision restart = decide_run(root / "dense", kManifest, false, "m.json");
  EXPECT_EQ(restart.disposition, Disposition::kRestartIncomplete);
  EXPECT_NE(restart.reason.find("no checkpoint"), std::string::npos);
  fs::remove_all(root);
}

// Resolved manifests name MoBA's gate; results stored before they did ran the block gate
// and must still skip and resume as such, whatever the default becomes.
TEST(RunFolder, ResultsStoredBeforeTheGateWasNamedReadAsTheBlockGate) {
  const json today = attention_to_json(parse_attention(json{{"name", "moba"}, {"block_size", 64}}, "$.attention", "m.json"));
  EXPECT_EQ(today.at("gate"), "block") << today.dump();
  const auto manifest_with = [](const json& attention) {
    return json{{"name", "m"}, {"methods", json::array({json{{"name", "moba"}, {"attention", attention}}})}};
  };
  const json before = manifest_with({{"name", "moba"}, {"block_size", 64}, {"top_k", 4}});
  const json block = manifest_with({{"name", "moba"}, {"block_size", 64}, {"top_k", 4}, {"gate", "block"}});
  const json token = manifest_with({{"name", "moba"}, {"block_size", 64}, {"top_k", 4}, {"gate", "token"}});
  json upgraded = before;
  upgrade_stored_manifest(upgraded);
  EXPECT_EQ(upgraded, block);

  const fs::path root = test::fresh_temp_dir("run_folder_gate");
  make_run(root, true, before, false);
  EXPECT_EQ(decide_run(root / "dense", block, false, "m.json").disposition, Disposition::kSkip);
  try {
    decide_run(root / "dense", token, false, "m.json");
    FAIL() << "block-gate results must not stand for a token-gate run";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.json_path(), "/methods/0/attention/gate");
  }
  fs::remove_all(root / "dense");
  make_run(root, false, before, true);
  EXPECT_EQ(decide_run(root / "dense", block, false, "m.json").disposition, Disposition::kResume);
  EXPECT_EQ(decide_run(root / "dense", token, false, "m.json").disposition, Disposition::kRestartIncomplete);
  fs::remove_all(root);
}

TEST(RunFolder, ResumeDropsRecordsAfterTheCheckpointAndMovingAsideKeepsEverything) {
  const fs::path root = test::fresh_temp_dir("run_folder_prepare");
  fs::path run = make_run(root, false, kManifest, true);
  std::ostringstream log;
  prepare_run_folder(run, decide_run(run, kManifest, false, "m.json"), kManifest, json{{"host", "h"}}, log);
  EXPECT_EQ(read_file(run / "records.jsonl"), "{\"iteration\": 0}\n{\"iteration\": 1}\n");
  const json context = json::parse(read_file(run / "context.json"));
  EXPECT_EQ(context["resumes"][0]["resumed_at_iteration"], 2);
  EXPECT_NE(log.str().find("resuming"), std::string::npos);

  fs::remove_all(run / "checkpoints");
  prepare_run_folder(run, decide_run(run, kManifest, false, "m.json"), kManifest, json{{"host", "h"}}, log);
  int aside = 0;
  for (const auto& e : fs::directory_iterator(root)) {
    if (e.path().filename().string().rfind("dense.interrupted-", 0) == 0) {
      ++aside;
      EXPECT_TRUE(fs::exists(e.path() / "records.jsonl"));
    }
  }
  EXPECT_EQ(aside, 1);
  EXPECT_EQ(json::parse(read_file(run / "context.json"))["host"], "h");
  fs::remove_all(root);
}

TEST(RunOrder, RunsOfOneNonMethodSweepPointExecuteBackToBack) {
  const Manifest m = parse_manifest(json::parse(R"({
    "name": "order",
    "model": {"preset": "qwen2-test"},
    "data": {"synthetic": {"length_mixture": [{"min_tokens": 8, "max_tokens": 16}]}},
    "train": {"iterations": 3},
    "method_defaults": {"attention": {"name": "moba", "block_size": 4, "top_k": 2}, "profile": "/p.json"},
    "methods": [{"name": "baseline", "preset": "baseline"}, {"name": "dst", "preset": "dst"}],
    "sweep": {"methods.dst.p": [0.1, 0.2], "seed": [1, 2]}
  })"),
                                    "m.json");
  std::vector<std::string> names;
  for (const RunSpec& run : select_runs(m, RunManifestOptions{})) names.push_back(run.name);
  // expand_runs lists method by method; execution goes seed by seed, methods in order.
  const std::vector<std::string> expected{"baseline__seed=1", "dst__p=0.1__seed=1", "dst__p=0.2__seed=1",
                                          "baseline__seed=2", "dst__p=0.1__seed=2", "dst__p=0.2__seed=2"};
  EXPECT_EQ(names, expected);
  RunManifestOptions only;
  only.only = "dst__p=0.2__seed=2";
  ASSERT_EQ(select_runs(m, only).size(), 1u);
}

TEST(FaultInjection, ParsesOrRejectsWithTheVariableName) {
  ::unsetenv("SB_FAULT_INJECT");
  EXPECT_FALSE(FaultInjection::from_environment());
  ::setenv("SB_FAULT_INJECT", "hang:rank=3:iteration=12", 1);
  const auto f = FaultInjection::from_environment();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, "hang");
  EXPECT_EQ(f->rank, 3);
  EXPECT_EQ(f->iteration, 12);
  f->fire_if_due(2, 12);  // not this rank: nothing happens
  ::setenv("SB_FAULT_INJECT", "error:rank=0:iteration=1", 1);
  EXPECT_THROW(FaultInjection::from_environment()->fire_if_due(0, 1), std::runtime_error);
  ::setenv("SB_FAULT_INJECT", "slow:rank=1:iteration=2:ms=40", 1);
  const auto slow = FaultInjection::from_environment();
  ASSERT_TRUE(slow);
  EXPECT_EQ(slow->kind, "slow");
  EXPECT_EQ(slow->ms, 40);
  const auto start = std::chrono::steady_clock::now();
  slow->fire_if_due(1, 2);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(40));
  // A delay belongs to slow only, and slow needs one.
  for (const char* malformed : {"explode:rank=0", "slow:rank=0:iteration=1", "crash:rank=0:iteration=1:ms=5"}) {
    ::setenv("SB_FAULT_INJECT", malformed, 1);
    try {
      FaultInjection::from_environment();
      ADD_FAILURE() << malformed;
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.json_path(), "SB_FAULT_INJECT");
    }
  }
  ::unsetenv("SB_FAULT_INJECT");
}

LaunchOptions shell_ranks(int world, const std::string& script) {
  LaunchOptions o;
  o.world_size = world;
  o.arguments = {"/bin/sh", "-c", script};
  o.grace = std::chrono::milliseconds(2000);
  return o;
}

// Rendezvous ports come from below the kernel's ephemeral range, where no outgoing
// connection can take one between its draw and rank 0's bind; they are bindable, and
// drawn at random (20 draws from 10000 ports are not all one).
TEST(LocalLauncher, RendezvousPortsAreDrawnBelowTheEphemeralRange) {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  ASSERT_TRUE(range >> low >> high) << "no ip_local_port_range to check against";
  if (std::max(1025, low - 10000) + 100 >= low) GTEST_SKIP() << "the ephemeral range starts at " << low << ": no room below it";
  std::set<int> ports;
  for (int i = 0; i < 20; ++i) {
    const int port = free_loopback_port();
    EXPECT_LT(port, low);
    EXPECT_GE(port, std::max(1025, low - 10000));
    ports.insert(port);
  }
  EXPECT_GT(ports.size(), 1u);
}

TEST(LocalLauncher, PrefixesOutputAndPassesTheRankVariables) {
  std::ostringstream log;
  const int code = launch_local_ranks(
      shell_ranks(3, "echo \"hello from $RANK of $WORLD_SIZE at $MASTER_ADDR\"; echo partial-line | tr -d '\\n'"), log);
  EXPECT_EQ(code, 0) << log.str();
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(log.str().find("[rank " + std::to_string(r) + "] hello from " + std::to_string(r) + " of 3 at 127.0.0.1"),
              std::string::npos)
        << log.str();
  }
  EXPECT_NE(log.str().find("[rank 2] partial-line"), std::string::npos) << log.str();
}

TEST(LocalLauncher, FirstFailureStopsTheOthers) {
  std::ostringstream log;
  const auto start = std::chrono::steady_clock::now();
  // Rank 1 fails at once; the others would sleep for a minute.
  const int code = launch_local_ranks(
      shell_ranks(3, "if [ \"$RANK\" = 1 ]; then echo 'rank one gives up'; exit 3; fi; sleep 60"), log);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(code, 1) << log.str();
  EXPECT_LT(seconds, 20.0) << log.str();
  EXPECT_NE(log.str().find("error: rank 1 exited with code 3 (last output: \"rank one gives up\")"), std::string::npos)
      << log.str();
}

TEST(LocalLauncher, ConfigurationErrorExitCodeTwoIsKept) {
  std::ostringstream log;
  EXPECT_EQ(launch_local_ranks(shell_ranks(2, "exit 2"), log), 2) << log.str();
}

TEST(LocalLauncher, RankThatIgnoresTerminationIsKilledAfterTheGracePeriod) {
  std::ostringstream log;
  const auto start = std::chrono::steady_clock::now();
  const int code = launch_local_ranks(
      shell_ranks(2, "if [ \"$RANK\" = 0 ]; then exit 1; fi; trap '' TERM; sleep 60"), log);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(code, 1) << log.str();
  EXPECT_LT(seconds, 20.0) << log.str();
}

}  // namespace
}  // namespace sb
