// The quickstart manifest through the real CLI. Its one-process form (the baseline method
// alone, dp 1, no latency profile) checks that the loss falls, every file is written,
// and reruns neither overwrite nor lose results; the showcase itself (baseline vs
// SparseBalance on 2 Gloo ranks, profile measured on first use) runs shortened.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "harness/common/atomic_file.h"
#include "tests/support/run_command.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::run_command;
using test::sparsebalance_binary;

struct Quickstart {
  fs::path dir;
  std::string manifest;
  std::string command;
};

// experiments/quickstart.json in one process with its baseline method alone (run
// "baseline": MoBA, fixed budget, data-order batching) and fewer iterations.
Quickstart shortened_quickstart(const std::string& name, int64_t iterations) {
  Quickstart q;
  q.dir = test::fresh_temp_dir(name);
  json j = json::parse(read_file(SB_SOURCE_DIR "/experiments/quickstart.json"));
  j["train"]["iterations"] = iterations;
  j["train"]["warmup_iterations"] = 2;
  j["parallelism"]["dp"] = 1;
  j["method_defaults"].erase("profile");
  j["methods"] = json::array({j["methods"][0]});
  q.manifest = (q.dir / "quickstart_short.json").string();
  std::ofstream(q.manifest) << j.dump(2);
  q.command = sparsebalance_binary() + " run " + q.manifest + " --results " + q.dir.string();
  return q;
}

std::vector<json> read_jsonl(const fs::path& path) {
  std::vector<json> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) lines.push_back(json::parse(line));
  return lines;
}

TEST(QuickstartEndToEnd, LossFallsAndEveryFileIsWritten) {
  Quickstart q = shortened_quickstart("quickstart_e2e", 30);
  auto r = run_command(q.command);
  ASSERT_EQ(r.exit_code, 0) << r.output;

  const fs::path run = q.dir / "quickstart" / "baseline";
  for (const char* file : {"manifest.resolved.json", "context.json", "records.jsonl", "status.json"}) {
    EXPECT_TRUE(fs::exists(run / file)) << file;
  }
  for (const char* file : {"report.json", "report.csv", "report.md"}) {
    EXPECT_TRUE(fs::exists(q.dir / "quickstart" / file)) << file;
  }

  auto records = read_jsonl(run / "records.jsonl");
  ASSERT_EQ(records.size(), 30u);
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i]["iteration"], static_cast<int64_t>(i));
    EXPECT_EQ(records[i]["warmup"], i < 2);
    EXPECT_GT(records[i]["iter_ms"].get<double>(), 0);
    EXPECT_GE(records[i]["imbalance"].get<double>(), 1.0);
    ASSERT_TRUE(records[i].contains("budgets")) << "MoBA reports the budget of every micro-batch";
    for (const auto& k : records[i]["budgets"]) EXPECT_EQ(k, 4) << "the baseline's fixed budget";
    EXPECT_FALSE(records[i].contains("microbatch_pred_ms")) << "no profile, no predictions";
  }
  // Initial loss is near ln(256) (uniform over the vocabulary); 30 steps must cut it
  // by at least a third (the full quickstart reaches about ln 3).
  const double first = records.front()["loss"], last = records.back()["loss"];
  EXPECT_NEAR(first, std::log(256.0), 0.5);
  EXPECT_LT(last, first * 2.0 / 3.0) << "first " << first << " last " << last;

  json context = json::parse(read_file(run / "context.json"));
  for (const char* key : {"host", "cpu_model", "libtorch", "git_sha", "build_type", "seed", "world"}) {
    EXPECT_TRUE(context.contains(key)) << key;
  }
  EXPECT_EQ(context["seed"], 1234);

  json report = json::parse(read_file(q.dir / "quickstart" / "report.json"));
  ASSERT_EQ(report["runs"].size(), 1u);
  EXPECT_EQ(report["runs"][0]["iterations_measured"], 28);
  EXPECT_DOUBLE_EQ(report["runs"][0]["loss_first"].get<double>(), first);
  EXPECT_DOUBLE_EQ(report["runs"][0]["loss_final"].get<double>(), last);
  EXPECT_NE(read_file(q.dir / "quickstart" / "report.md").find("| baseline | fixed | 1 x 1 | complete |"),
            std::string::npos);
  fs::remove_all(q.dir);
}

TEST(QuickstartEndToEnd, ShowcaseMeasuresItsProfileOnceAndComparesTheMethods) {
  const fs::path dir = test::fresh_temp_dir("quickstart_showcase");
  json j = json::parse(read_file(SB_SOURCE_DIR "/experiments/quickstart.json"));
  j["train"]["iterations"] = 6;
  j["train"]["warmup_iterations"] = 2;
  const fs::path profile = dir / "profiles" / "cpu.json";
  j["method_defaults"]["profile"] = profile.string();
  const std::string manifest = (dir / "quickstart_showcase.json").string();
  std::ofstream(manifest) << j.dump(2);
  const std::string command = sparsebalance_binary() + " run " + manifest + " --results " + dir.string();

  auto r = run_command(command);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("measuring the latency profile"), std::string::npos) << r.output;
  // In a child process that has exited before the ranks start (on a GPU its cached
  // blocks would otherwise stay reserved beside rank 0).
  EXPECT_NE(r.output.find("measuring in a process of its own"), std::string::npos) << r.output;
  ASSERT_TRUE(fs::exists(profile));
  const std::string measured = read_file(profile);
  const json profile_json = json::parse(measured);
  EXPECT_EQ(profile_json["model"]["preset"], "qwen2-tiny");
  EXPECT_EQ(profile_json["attention"]["block_size"], 32);

  for (const char* name : {"baseline", "sparsebalance"}) {
    const fs::path run = dir / "quickstart" / name;
    ASSERT_TRUE(fs::exists(run / "status.json")) << name;
    // The profile the run predicted with is kept with its results.
    EXPECT_EQ(read_file(run / "profile.json"), measured) << name;
    const json context = json::parse(read_file(run / "context.json"));
    EXPECT_EQ(context["profile"]["kind"], "measured");
    EXPECT_EQ(context["experiment"]["method"], name);
    EXPECT_EQ(context["experiment"]["baseline"], "baseline");
    EXPECT_EQ(context["interleave"]["block_iterations"], 5) << "the showcase's methods take turns";
    EXPECT_EQ(context["world"]["dp"], 2);
    for (const json& record : read_jsonl(run / "records.jsonl")) {
      ASSERT_EQ(record["microbatch_pred_ms"].size(), record["microbatch_ms"].size());
      ASSERT_EQ(record["budgets"].size(), record["microbatch_ms"].size());
      for (const auto& k : record["budgets"]) {
        if (std::string(name) == "baseline") {
          EXPECT_EQ(k, 4);
        } else {
          EXPECT_GE(k, 1);  // DST: between k_min = 1 and k_max = 2 x 4
          EXPECT_LE(k, 8);
        }
      }
    }
  }
  const json report = json::parse(read_file(dir / "quickstart" / "report.json"));
  EXPECT_EQ(report["runs"].size(), 2u);

  // A rerun skips both runs and measures nothing.
  auto again = run_command(command);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(again.output.find("measuring the latency profile"), std::string::npos) << again.output;
  EXPECT_EQ(read_file(profile), measured);
  fs::remove_all(dir);
}

TEST(QuickstartEndToEnd, RerunSkipsConflictRefusesForceReplaces) {
  Quickstart q = shortened_quickstart("quickstart_rerun", 3);
  ASSERT_EQ(run_command(q.command).exit_code, 0);
  const fs::path records = q.dir / "quickstart" / "baseline" / "records.jsonl";
  const std::string first_records = read_file(records);

  // Same manifest: skipped, nothing rewritten.
  auto again = run_command(q.command);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("skipping"), std::string::npos) << again.output;
  EXPECT_EQ(read_file(records), first_records);

  // Changed manifest: refused with exit 2, naming the first difference.
  json j = json::parse(read_file(q.manifest));
  j["train"]["lr"] = 0.001;
  std::ofstream(q.manifest) << j.dump(2);
  auto conflict = run_command(q.command);
  EXPECT_EQ(conflict.exit_code, 2) << conflict.output;
  EXPECT_NE(conflict.output.find("/train/lr"), std::string::npos) << conflict.output;
  EXPECT_EQ(read_file(records), first_records);

  // --force replaces the results with the new manifest's.
  auto forced = run_command(q.command + " --force");
  EXPECT_EQ(forced.exit_code, 0) << forced.output;
  json stored = json::parse(read_file(q.dir / "quickstart" / "baseline" / "manifest.resolved.json"));
  EXPECT_DOUBLE_EQ(stored["train"]["lr"].get<double>(), 0.001);
  fs::remove_all(q.dir);
}

TEST(QuickstartEndToEnd, IncompleteRunIsMovedAsideNotLost) {
  Quickstart q = shortened_quickstart("quickstart_incomplete", 3);
  ASSERT_EQ(run_command(q.command).exit_code, 0);
  const fs::path run = q.dir / "quickstart" / "baseline";
  fs::remove(run / "status.json");  // as if the process had died before finishing
  auto r = run_command(q.command);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("incomplete"), std::string::npos) << r.output;
  int aside = 0;
  for (const auto& e : fs::directory_iterator(q.dir / "quickstart")) {
    if (e.path().filename().string().rfind("baseline.interrupted-", 0) == 0) {
      ++aside;
      EXPECT_TRUE(fs::exists(e.path() / "records.jsonl"));
    }
  }
  EXPECT_EQ(aside, 1);
  EXPECT_TRUE(fs::exists(run / "status.json"));
  fs::remove_all(q.dir);
}

TEST(QuickstartEndToEnd, SameSeedReproducesTheLossCurve) {
  Quickstart a = shortened_quickstart("quickstart_seed_a", 3);
  Quickstart b = shortened_quickstart("quickstart_seed_b", 3);
  ASSERT_EQ(run_command(a.command).exit_code, 0);
  ASSERT_EQ(run_command(b.command).exit_code, 0);
  auto ra = read_jsonl(a.dir / "quickstart" / "baseline" / "records.jsonl");
  auto rb = read_jsonl(b.dir / "quickstart" / "baseline" / "records.jsonl");
  ASSERT_EQ(ra.size(), rb.size());
  for (size_t i = 0; i < ra.size(); ++i) {
    EXPECT_EQ(ra[i]["tokens"], rb[i]["tokens"]);
    EXPECT_NEAR(ra[i]["loss"].get<double>(), rb[i]["loss"].get<double>(), 1e-6);
  }
  fs::remove_all(a.dir);
  fs::remove_all(b.dir);
}

}  // namespace
}  // namespace sb
