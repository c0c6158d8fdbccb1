// Report: summaries computed from records by the written definitions (checked on
// hand-computed numbers), and golden outputs for the CSV and Markdown writers.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "harness/common/atomic_file.h"
#include "harness/report/run_summary.h"
#include "harness/train/iteration_record.h"
#include "tests/support/run_command.h"

namespace sb {
namespace {

namespace fs = std::filesystem;

IterationRecord record(int64_t it, bool warmup, double loss, int64_t tokens, double iter_ms,
                       std::vector<double> microbatch_ms) {
  IterationRecord r;
  r.iteration = it;
  r.warmup = warmup;
  r.loss = loss;
  r.tokens = tokens;
  r.iter_ms = iter_ms;
  r.microbatch_ms = std::move(microbatch_ms);
  r.derive_single_stage_metrics();
  return r;
}

TEST(IterationRecord, DerivedMetricsFollowTheirDefinitions) {
  IterationRecord r = record(0, false, 1, 10, 100.0, {10.0, 30.0, 20.0});
  EXPECT_DOUBLE_EQ(r.imbalance, 30.0 / 20.0);
  EXPECT_EQ(r.per_stage_busy_ms, (std::vector<double>{60.0}));
  EXPECT_EQ(r.per_stage_idle_ms, (std::vector<double>{40.0}));
  EXPECT_DOUBLE_EQ(r.bubble_fraction, 0.4);
  IterationRecord back = iteration_record_from_json(iteration_record_to_json(r));
  EXPECT_EQ(iteration_record_to_json(back), iteration_record_to_json(r));
}

TEST(RunSummary, ComputedFromRecordsExcludingWarmup) {
  fs::path root = test::fresh_temp_dir("report_summary");
  fs::path run = root / "m" / "dense";
  fs::create_directories(run);
  write_file_atomic(run / "manifest.resolved.json",
                    R"({"methods": [{"name": "dense", "attention": {"name": "dense"}, "batching": "sequential"}]})");
  write_file_atomic(run / "context.json", R"({"git_sha": "abc123"})");
  std::ofstream out(run / "records.jsonl");
  out << iteration_record_to_json(record(0, true, 5.0, 1000, 900.0, {900.0})).dump() << "\n";
  out << iteration_record_to_json(record(1, false, 4.0, 100, 10.0, {5.0, 5.0})).dump() << "\n";
  out << iteration_record_to_json(record(2, false, 3.0, 300, 30.0, {10.0, 20.0})).dump() << "\n";
  out << iteration_record_to_json(record(3, false, 2.0, 200, 20.0, {10.0})).dump() << "\n";
  out.close();

  RunSummary s = summarize_run(run);
  EXPECT_EQ(s.state, "incomplete");  // no status.json yet
  EXPECT_EQ(s.git_sha, "abc123");
  EXPECT_EQ(s.iterations_recorded, 4);
  EXPECT_EQ(s.iterations_measured, 3);
  EXPECT_DOUBLE_EQ(s.median_iter_ms, 20.0);
  EXPECT_DOUBLE_EQ(s.tokens_per_s, 600.0 / 60.0 * 1000.0);
  EXPECT_DOUBLE_EQ(s.first_loss, 5.0);
  EXPECT_DOUBLE_EQ(s.last_loss, 2.0);
  // imbalances 1.0, 20/15, 1.0 -> median 1.0; bubbles 0, 0, 0.5 -> mean 1/6
  EXPECT_DOUBLE_EQ(s.median_imbalance, 1.0);
  EXPECT_NEAR(s.mean_bubble_fraction, 0.5 / 3.0, 1e-12);

  write_file_atomic(run / "status.json", R"({"state": "complete"})");
  auto runs = write_report(root / "m");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].state, "complete");
  EXPECT_TRUE(fs::exists(root / "m" / "report.json"));
  EXPECT_TRUE(fs::exists(root / "m" / "report.csv"));
  EXPECT_TRUE(fs::exists(root / "m" / "report.md"));
  fs::remove_all(root);
}

TEST(RunSummary, MedianOfEvenCountAveragesTheMiddlePair) {
  EXPECT_DOUBLE_EQ(median_of({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median_of({7}), 7);
}

std::vector<RunSummary> golden_runs() {
  RunSummary a;
  a.run = "dense";
  a.state = "complete";
  a.attention = "dense";
  a.batching = "sequential";
  a.dp = 2;
  a.pp = 4;
  a.git_sha = "0123abc";
  a.iterations_recorded = 12;
  a.iterations_measured = 10;
  a.median_iter_ms = 123.4567;
  a.tokens_per_s = 9876.54;
  a.first_loss = 5.5;
  a.last_loss = 1.25;
  a.median_imbalance = 1.2346;
  a.mean_bubble_fraction = 0.0412;
  return {a};
}

TEST(ReportWriters, CsvGolden) {
  EXPECT_EQ(report_to_csv(golden_runs()),
            "run,state,attention,batching,dp,pp,git_sha,iterations_recorded,iterations_measured,"
            "median_iter_ms,tokens_per_s,first_loss,last_loss,median_imbalance,"
            "mean_bubble_fraction\n"
            "dense,complete,dense,sequential,2,4,0123abc,12,10,123.457,9876.5,5.500000,1.250000,"
            "1.2346,0.0412\n");
}

TEST(ReportWriters, MarkdownGolden) {
  EXPECT_EQ(report_to_markdown("quickstart", golden_runs()),
            "# quickstart\n\n"
            "| run | state | attention | batching | dp x pp | iterations measured | median iteration ms "
            "| tokens/s | first loss | last loss | imbalance (median) | bubble fraction (mean) |\n"
            "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n"
            "| dense | complete | dense | sequential | 2 x 4 | 10 | 123.46 | 9877 | 5.5000 | 1.2500 | "
            "1.235 | 0.041 |\n"
            "\nMedians and rates exclude warm-up iterations. Definitions: README.md, \"Metrics\".\n");
}

TEST(ReportWriters, JsonCarriesEveryField) {
  auto j = report_to_json("quickstart", golden_runs());
  EXPECT_EQ(j["manifest"], "quickstart");
  EXPECT_EQ(j["runs"][0]["git_sha"], "0123abc");
  EXPECT_DOUBLE_EQ(j["runs"][0]["median_iter_ms"].get<double>(), 123.4567);
  EXPECT_EQ(j["runs"][0]["iterations_measured"], 10);
  EXPECT_EQ(j["runs"][0]["dp"], 2);
  EXPECT_EQ(j["runs"][0]["pp"], 4);
}

}  // namespace
}  // namespace sb
