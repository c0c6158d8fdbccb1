// The CLI's contract: exit 0 / 2 / 1, --help on every subcommand, errors that name
// the file and JSON path.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>
#include <torch/version.h>

#include "harness/common/atomic_file.h"
#include "tests/cpu/report_fixture.h"
#include "tests/support/run_command.h"

namespace sb {
namespace {

using test::run_command;
using test::sparsebalance_binary;

std::string write_manifest(const std::filesystem::path& dir, const nlohmann::json& j) {
  auto path = dir / "m.json";
  std::ofstream(path) << j.dump(2);
  return path.string();
}

nlohmann::json small_manifest() {
  return nlohmann::json::parse(R"({
    "name": "cli",
    "model": {"preset": "qwen2-test"},
    "data": {"synthetic": {"length_mixture": [{"min_tokens": 8, "max_tokens": 24}]}},
    "train": {"iterations": 2, "warmup_iterations": 0, "global_batch_size": 2},
    "methods": [{"name": "dense"}]
  })");
}

TEST(Cli, HelpOnEverySubcommandExitsZero) {
  for (const char* sub : {"", " run", " report", " version"}) {
    auto r = run_command(sparsebalance_binary() + sub + " --help");
    EXPECT_EQ(r.exit_code, 0) << sub << "\n" << r.output;
    EXPECT_NE(r.output.find("Usage:"), std::string::npos) << r.output;
  }
}

TEST(Cli, RunHelpSaysWhatARerunDoes) {
  auto r = run_command(sparsebalance_binary() + " run --help");
  EXPECT_NE(r.output.find("SKIPPED"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--force"), std::string::npos) << r.output;
}

TEST(Cli, UsageErrorsExitTwo) {
  EXPECT_EQ(run_command(sparsebalance_binary()).exit_code, 2);
  EXPECT_EQ(run_command(sparsebalance_binary() + " frobnicate").exit_code, 2);
  EXPECT_EQ(run_command(sparsebalance_binary() + " run").exit_code, 2);
  EXPECT_EQ(run_command(sparsebalance_binary() + " run --bogus-flag x.json").exit_code, 2);
}

TEST(Cli, UnknownManifestKeyExitsTwoAndNamesTheJsonPath) {
  auto dir = test::fresh_temp_dir("cli_unknown_key");
  auto j = small_manifest();
  j["train"]["learning_rate"] = 0.1;
  std::string manifest = write_manifest(dir, j);
  auto r = run_command(sparsebalance_binary() + " run " + manifest + " --results " + dir.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(manifest), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("$.train.learning_rate"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"lr\""), std::string::npos) << r.output;  // lists allowed keys
  EXPECT_FALSE(std::filesystem::exists(dir / "cli")) << "nothing may be written on a config error";
  std::filesystem::remove_all(dir);
}

// --set reaches the resolved manifest and the recorded command line, also through the
// local launcher (dp 2, set on the command line), which leaves no plan file behind; a
// bad one is exit 2 naming the flag, before anything is written.
TEST(Cli, SetOverridesAManifestValueAndIsRecorded) {
  auto dir = test::fresh_temp_dir("cli_set");
  std::string manifest = write_manifest(dir, small_manifest());
  auto bad = run_command(sparsebalance_binary() + " run --set train.iterations=oops " + manifest + " --results " +
                         dir.string());
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("$.train.iterations"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("--set train.iterations=oops"), std::string::npos) << bad.output;
  auto malformed = run_command(sparsebalance_binary() + " run " + manifest + " --set train.iterations");
  EXPECT_EQ(malformed.exit_code, 2) << malformed.output;
  EXPECT_NE(malformed.output.find("--set"), std::string::npos) << malformed.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "cli")) << "nothing may be written on a config error";

  auto r = run_command(sparsebalance_binary() + " run " + manifest + " --set train.iterations=3 --set " +
                       "'description=set on the command line' --set parallelism.dp=2 --results " + dir.string() +
                       " --no-plots");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto resolved = nlohmann::json::parse(read_file(dir / "cli" / "dense" / "manifest.resolved.json"));
  EXPECT_EQ(resolved["train"]["iterations"], 3);
  EXPECT_EQ(resolved["parallelism"]["dp"], 2);
  EXPECT_EQ(resolved["description"], "set on the command line");
  const auto context = nlohmann::json::parse(read_file(dir / "cli" / "dense" / "context.json"));
  EXPECT_EQ(context["world"]["world_size"], 2);
  EXPECT_EQ(context["command_line"], "sparsebalance run " + manifest +
                                         " --set train.iterations=3 --set 'description=set on the command line'"
                                         " --set parallelism.dp=2");
  for (const auto& entry : std::filesystem::directory_iterator(dir / "cli")) {
    EXPECT_EQ(entry.path().filename().string().rfind(".run_plan", 0), std::string::npos) << entry.path();
  }
  std::filesystem::remove_all(dir);
}

TEST(Cli, MissingManifestFileExitsTwo) {
  auto r = run_command(sparsebalance_binary() + " run /nonexistent/m.json");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("/nonexistent/m.json"), std::string::npos) << r.output;
}

TEST(Cli, OnlyWithUnknownRunExitsTwoListingRuns) {
  auto dir = test::fresh_temp_dir("cli_only");
  std::string manifest = write_manifest(dir, small_manifest());
  auto r = run_command(sparsebalance_binary() + " run " + manifest + " --only nope --results " +
                       dir.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--only"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("dense"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

TEST(Cli, ReportOnMissingOrEmptyFolderExitsTwo) {
  auto r = run_command(sparsebalance_binary() + " report /nonexistent/results/x");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  auto dir = test::fresh_temp_dir("cli_empty_report");
  r = run_command(sparsebalance_binary() + " report " + dir.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("holds no run folders"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(dir.string()), std::string::npos) << "the error names the folder: " << r.output;
  std::filesystem::remove_all(dir);
}

TEST(Cli, ReportWritesTheThreeFilesAndPrintsTheTables) {
  auto root = test::fresh_temp_dir("cli_report");
  const std::filesystem::path dir = test::write_report_fixture(root);
  auto r = run_command(sparsebalance_binary() + " report " + dir.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("## DST ablation: dst"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| base__seed=1 | fixed | 2 x 2 | complete |"), std::string::npos) << r.output;
  for (const char* file : {"report.json", "report.csv", "report.md"}) {
    EXPECT_TRUE(std::filesystem::exists(dir / file)) << file;
  }
  EXPECT_EQ(nlohmann::json::parse(sb::read_file(dir / "report.json"))["runs"].size(), 14u);
  std::filesystem::remove_all(root);
}

TEST(Cli, VersionNamesLibTorchAndBuild) {
  auto r = run_command(sparsebalance_binary() + " version");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(std::string("LibTorch     ") + TORCH_VERSION), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("git SHA"), std::string::npos) << r.output;
  auto j = run_command(sparsebalance_binary() + " version --json");
  auto info = nlohmann::json::parse(j.output.substr(j.output.find('{')));
  EXPECT_TRUE(info.contains("nccl"));
  EXPECT_TRUE(info.contains("build_type"));
}

}  // namespace
}  // namespace sb
