// Issue "nothing lost, nothing mixed", through the CLI as a user meets it: one writer per
// results folder, unique run names, a NaN guard, checksummed checkpoints, a report that
// checks its records, bounded inputs and the smaller messages. Each case failed on the
// code before it (the probes are in docs/cli.md, "What is guaranteed").
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness/common/atomic_file.h"
#include "tests/support/run_command.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::run_command;
using test::sparsebalance_binary;

json tiny_manifest(const std::string& name, int64_t iterations = 4) {
  return json{{"name", name},
              {"model", {{"preset", "qwen2-test"}}},
              {"data", {{"synthetic", {{"length_mixture", json::array({{{"min_tokens", 8}, {"max_tokens", 24}}})}}}}},
              {"train", {{"iterations", iterations}, {"warmup_iterations", 0}, {"global_batch_size", 2}}},
              {"methods", json::array({{{"name", "dense"}}})}};
}

std::string write_json(const fs::path& file, const json& j) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << j.dump(2);
  return file.string();
}

// `sparsebalance run` of a manifest into <dir>/results, with extra environment.
test::CommandResult run_into(const fs::path& dir, const std::string& manifest, const std::string& env = "",
                             const std::string& flags = "") {
  return run_command("SB_NO_PLOTS=1 " + env + " " + sparsebalance_binary() + " run " + manifest + " --results " +
                     (dir / "results").string() + " " + flags);
}

std::vector<std::string> lines_of(const fs::path& file) {
  std::vector<std::string> lines;
  std::istringstream in(read_file(file));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

void write_lines(const fs::path& file, const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  std::ofstream(file, std::ios::trunc) << text;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// 1. A second `run` on a results folder that a live `run` writes is refused, naming the
// holder; once the holder is killed, the next `run` proceeds and says it died holding it.
TEST(NothingLost, OneWriterPerResultsFolder) {
  const fs::path dir = test::fresh_temp_dir("nl_one_writer");
  const std::string manifest = write_json(dir / "m.json", tiny_manifest("lock"));
  // The first run sleeps 120 s before its iteration 1 (a slow peer, SB_FAULT_INJECT).
  const auto started = run_command("SB_NO_PLOTS=1 SB_FAULT_INJECT=slow:rank=0:iteration=1:ms=120000 " +
                                   sparsebalance_binary() + " run " + manifest + " --results " +
                                   (dir / "results").string() + " > " + (dir / "first.log").string() +
                                   " 2>&1 & echo $!");
  const std::string pid = started.output.substr(0, started.output.find_first_of("\n"));
  ASSERT_FALSE(pid.empty()) << started.output;
  const fs::path records = dir / "results" / "lock" / "dense" / "records.jsonl";
  for (int i = 0; i < 600 && !(fs::exists(records) && fs::file_size(records) > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(fs::exists(records)) << read_file(dir / "first.log");

  const auto second = run_into(dir, manifest);
  EXPECT_EQ(second.exit_code, 2) << second.output;
  EXPECT_TRUE(contains(second.output, "is being written by another sparsebalance")) << second.output;
  EXPECT_TRUE(contains(second.output, "PID " + pid + " on host")) << second.output;
  EXPECT_EQ(lines_of(records).size(), 1u) << "the second run must not touch the first's records";

  run_command("kill -9 " + pid + "; sleep 0.5");
  const auto third = run_into(dir, manifest);
  EXPECT_EQ(third.exit_code, 0) << third.output;
  EXPECT_TRUE(contains(third.output, "ended without releasing it")) << third.output;
  EXPECT_TRUE(contains(third.output, "PID " + pid)) << third.output;
  EXPECT_EQ(lines_of(records).size(), 4u) << third.output;
  fs::remove_all(dir);
}

// 2. Sweep values that name one run folder, or repeat, are refused before anything starts.
TEST(NothingLost, SweepValuesThatNameOneRunAreRefused) {
  const fs::path dir = test::fresh_temp_dir("nl_sweep_names");
  json seeds = tiny_manifest("seeds");
  seeds["sweep"] = {{"seed", {1, 1}}};
  auto r = run_into(dir, write_json(dir / "seeds.json", seeds));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "$.sweep[\"seed\"]") && contains(r.output, "repeats the value 1")) << r.output;

  fs::create_directories(dir / "a");
  std::ofstream(dir / "a" / "len.txt") << "12\n20\n";
  std::ofstream(dir / "a-len.txt") << "16\n";
  json files = tiny_manifest("files");
  files["data"] = {{"synthetic", {{"lengths", "file"}, {"length_file", "a/len.txt"}}}};
  files["sweep"] = {{"data.synthetic.length_file", {"a/len.txt", "a-len.txt"}}};
  r = run_into(dir, write_json(dir / "files.json", files));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "\"a/len.txt\" and \"a-len.txt\"") && contains(r.output, "a-len.txt\" (")) << r.output;
  EXPECT_FALSE(fs::exists(dir / "results")) << "nothing may be written";
  fs::remove_all(dir);
}

// 3. `report` checks each run's records: gaps, duplicates, order, and the count a
// complete run's manifest asks for; a run that fails shows no numbers and report exits 1.
TEST(NothingLost, ReportChecksEachRunsRecords) {
  const fs::path dir = test::fresh_temp_dir("nl_report_checks");
  const std::string manifest = write_json(dir / "m.json", tiny_manifest("checked"));
  ASSERT_EQ(run_into(dir, manifest).exit_code, 0);
  const fs::path folder = dir / "results" / "checked";
  const fs::path records = folder / "dense" / "records.jsonl";
  const std::vector<std::string> good = lines_of(records);
  ASSERT_EQ(good.size(), 4u);
  const std::string report = sparsebalance_binary() + " report " + folder.string();

  auto r = run_command(report);
  EXPECT_EQ(r.exit_code, 0) << r.output;

  write_lines(records, {good[0], good[1], good[2], good[3], good[1]});  // a second writer's line
  r = run_command(report);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "iteration 1 is recorded twice (records 2 and 5)")) << r.output;
  EXPECT_TRUE(contains(r.output, "fail the record check") && contains(r.output, "dense")) << r.output;
  EXPECT_TRUE(contains(read_file(folder / "report.md"), "invalid records"));
  const json summary = json::parse(read_file(folder / "report.json"));
  EXPECT_TRUE(summary["runs"][0]["iter_ms"].is_null()) << "a failing run's numbers must not be shown";

  write_lines(records, {good[0], good[2], good[3]});
  r = run_command(report);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "iteration 1 is missing (record 2 is iteration 2)")) << r.output;

  write_lines(records, {good[0], good[1], good[2]});  // the advice for a cut line, followed
  r = run_command(report);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "marked complete with 3 of the 4 iterations")) << r.output;

  // An incomplete run whose writer was killed mid-line passes: the cut line is no record.
  fs::remove(records.parent_path() / "status.json");
  write_lines(records, {good[0], good[1]});
  std::ofstream(records, std::ios::app) << good[2].substr(0, 20);
  r = run_command(report);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(read_file(folder / "report.md"), "incomplete")) << r.output;
  fs::remove_all(dir);
}

// 4. A non-finite loss stops the run at that iteration with exit 2, naming the iteration,
// the rank and the value; the records written before stay valid. With one rank, with
// two, and with train.nonfinite "skip". A learning rate above 1 is refused.
TEST(NothingLost, NonFiniteLossStopsTheRunOrSkipsTheStep) {
  const fs::path dir = test::fresh_temp_dir("nl_nonfinite");
  const std::string one = write_json(dir / "one.json", tiny_manifest("nan1"));
  auto r = run_into(dir, one, "SB_FAULT_INJECT=nan:rank=0:iteration=2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "iteration 2: the loss is nan")) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 0 (")) << r.output;
  const fs::path records = dir / "results" / "nan1" / "dense" / "records.jsonl";
  ASSERT_EQ(lines_of(records).size(), 2u);
  for (const std::string& line : lines_of(records)) EXPECT_NO_THROW(json::parse(line));
  EXPECT_FALSE(fs::exists(records.parent_path() / "status.json"));

  json two = tiny_manifest("nan2");
  two["parallelism"] = {{"dp", 2}};
  r = run_into(dir, write_json(dir / "two.json", two), "SB_FAULT_INJECT=nan:rank=1:iteration=1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "iteration 1: the loss is nan")) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 1 (")) << r.output;
  EXPECT_FALSE(contains(r.output, "type must be number")) << r.output;

  json skip = tiny_manifest("nanskip");
  skip["train"]["nonfinite"] = "skip";
  skip["checkpoint"] = {{"at_end", true}};
  r = run_into(dir, write_json(dir / "skip.json", skip), "SB_FAULT_INJECT=nan:rank=0:iteration=2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::vector<std::string> skipped = lines_of(dir / "results" / "nanskip" / "dense" / "records.jsonl");
  ASSERT_EQ(skipped.size(), 4u);
  EXPECT_FALSE(json::parse(skipped[1]).contains("skipped_step"));
  EXPECT_TRUE(json::parse(skipped[2]).value("skipped_step", false)) << skipped[2];
  EXPECT_FALSE(json::parse(skipped[2]).contains("loss")) << "NaN is left out, never written as a number";
  EXPECT_EQ(run_command(sparsebalance_binary() + " report " + (dir / "results" / "nanskip").string()).exit_code, 0);

  // eval ppl of the NaN weights prints JSON (null), not NaN.
  std::ofstream(dir / "heldout.jsonl") << "{\"input_ids\": [1, 2, 3, 4, 5, 6]}\n";
  r = run_command(sparsebalance_binary() + " eval ppl --model " +
                  (dir / "results" / "nanskip" / "dense" / "checkpoints" / "iter_00000004").string() + " --input " +
                  (dir / "heldout.jsonl").string() + " --max-length 16 2>/dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const json ppl = json::parse(r.output);
  EXPECT_TRUE(ppl["nll"].is_null() && ppl["ppl"].is_null()) << r.output;

  json high = tiny_manifest("lr");
  high["train"]["lr"] = 1e30;
  r = run_into(dir, write_json(dir / "lr.json", high));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "$.train.lr") && contains(r.output, "(0, 1]")) << r.output;
  fs::remove_all(dir);
}

// 5. Unbounded inputs are refused before anything starts, with the limit and the way out.
TEST(NothingLost, UnboundedInputsAreRefusedWithTheLimit) {
  const fs::path dir = test::fresh_temp_dir("nl_bounds");
  json grid = tiny_manifest("grid");
  json values = json::array();
  for (int i = 0; i < 1000; ++i) values.push_back(i);
  grid["sweep"] = {{"seed", values}, {"train.lr", {0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.009, 0.01}},
                   {"train.weight_decay", json::array({0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9})},
                   {"train.grad_clip", json::array({1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0})}};
  auto r = run_into(dir, write_json(dir / "grid.json", grid));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "expands to 1000000 runs, more than max_runs (1000)")) << r.output;

  json threads = tiny_manifest("threads");
  threads["train"]["threads"] = 100000;
  r = run_into(dir, write_json(dir / "threads.json", threads));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "$.train.threads") && contains(r.output, "[0, 1024]")) << r.output;

  json batch = tiny_manifest("batch");
  batch["train"]["global_batch_size"] = 1000000000;
  r = run_into(dir, write_json(dir / "batch.json", batch));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "$.train.global_batch_size") && contains(r.output, "half of this machine")) << r.output;

  std::string deep = "{\"name\": \"deep\", \"description\": ";
  for (int i = 0; i < 100000; ++i) deep += "[";
  for (int i = 0; i < 100000; ++i) deep += "]";
  std::ofstream(dir / "deep.json") << deep << "}";
  r = run_into(dir, (dir / "deep.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "nests deeper than 64 levels")) << r.output.substr(0, 2000);

  std::ofstream(dir / "twice.json") << R"({"name": "twice", "model": {"preset": "qwen2-test"},
    "data": {"synthetic": {"length_mixture": [{"min_tokens": 8, "max_tokens": 24}]}},
    "train": {"iterations": 2, "lr": 0.001, "warmup_iterations": 0, "lr": 0.5},
    "methods": [{"name": "dense"}]})";
  r = run_into(dir, (dir / "twice.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "$.train.lr") && contains(r.output, "given twice")) << r.output;
  for (const char* name : {"grid", "threads", "deep", "twice"}) EXPECT_FALSE(fs::exists(dir / "results" / name)) << name;
  EXPECT_FALSE(fs::exists(dir / "results" / "batch" / "dense")) << "refused before any run folder";
  fs::remove_all(dir);
}

// 6. A damaged checkpoint is refused on resume, naming the file and how to recover; the
// recovery it names works.
TEST(NothingLost, DamagedCheckpointIsRefusedOnResume) {
  const fs::path dir = test::fresh_temp_dir("nl_checksums");
  json m = tiny_manifest("ckpt", 6);
  m["checkpoint"] = {{"every_iterations", 2}, {"keep_last", 2}};
  const std::string manifest = write_json(dir / "m.json", m);
  auto r = run_into(dir, manifest, "SB_FAULT_INJECT=crash:rank=0:iteration=5");
  ASSERT_NE(r.exit_code, 0) << r.output;
  const fs::path checkpoints = dir / "results" / "ckpt" / "dense" / "checkpoints";
  const fs::path newest = checkpoints / "iter_00000004";
  ASSERT_TRUE(fs::exists(newest / "checksums.sha256")) << r.output;
  const fs::path model = newest / "model-00001-of-00001.safetensors";
  {
    std::fstream file(model, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(fs::file_size(model) / 2));
    const std::string zeros(256, '\0');
    file.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  }
  r = run_into(dir, manifest);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, model.string() + " differs from the SHA-256")) << r.output;
  EXPECT_TRUE(contains(r.output, "delete " + newest.string())) << r.output;

  fs::resize_file(checkpoints / "iter_00000002" / "trainer_state.json", 10);
  fs::remove_all(newest);  // the advice; the one before it is damaged too
  r = run_into(dir, manifest);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "trainer_state.json")) << r.output;

  fs::remove_all(checkpoints / "iter_00000002");
  r = run_into(dir, manifest);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(lines_of(dir / "results" / "ckpt" / "dense" / "records.jsonl").size(), 6u);

  // Two ranks: each verifies the files it wrote; rank 1's RNG state is rank 1's to find.
  json two = tiny_manifest("ckpt2", 4);
  two["parallelism"] = {{"dp", 2}};
  two["checkpoint"] = {{"every_iterations", 2}};
  const std::string two_ranks = write_json(dir / "two.json", two);
  r = run_into(dir, two_ranks, "SB_FAULT_INJECT=crash:rank=0:iteration=3");
  ASSERT_NE(r.exit_code, 0) << r.output;
  const fs::path rng = dir / "results" / "ckpt2" / "dense" / "checkpoints" / "iter_00000002" / "rng-rank-00001.safetensors";
  ASSERT_TRUE(fs::exists(rng)) << r.output;
  fs::resize_file(rng, fs::file_size(rng) - 1);
  r = run_into(dir, two_ranks);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, rng.string() + " differs from the SHA-256")) << r.output;
  fs::remove_all(dir);
}

// 7. The smaller messages.
TEST(NothingLost, SmallerMessagesNameTheirCause) {
  const fs::path dir = test::fresh_temp_dir("nl_messages");
  const std::string manifest = write_json(dir / "m.json", tiny_manifest("msgs", 2));

  auto r = run_command(sparsebalance_binary() + " frobnicate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.output, "unknown command \"frobnicate\"") && contains(r.output, "run, report")) << r.output;

  r = run_command(sparsebalance_binary() + " run " + dir.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.output, "is a folder, not a manifest file")) << r.output;

  r = run_into(dir, manifest, "", "--progress-every 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.output, "must be 1 or more, got 0")) << r.output;

  r = run_into(dir, manifest, "", "--set train.lr=0.001 --set train.lr=0.002");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.output, "--set train.lr=0.001 set it first")) << r.output;

  std::ofstream(dir / "a-file") << "x";
  r = run_command(sparsebalance_binary() + " run " + manifest + " --results " + (dir / "a-file").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "is a file, not a folder")) << r.output;

  json threads = tiny_manifest("threads1", 2);
  threads["train"]["threads"] = 1;
  ASSERT_EQ(run_into(dir, write_json(dir / "t.json", threads)).exit_code, 0);
  const json context = json::parse(read_file(dir / "results" / "threads1" / "dense" / "context.json"));
  EXPECT_EQ(context["intra_op_threads"], 1);

  r = run_command(sparsebalance_binary() + " report " + (dir / "results" / "threads1").string() + " --run nosuch --plots");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.output, "names no run folder") && contains(r.output, "dense")) << r.output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sb
