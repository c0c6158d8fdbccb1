// Report: every number of a hand-built results folder (tests/cpu/report_fixture.h)
// checked against values worked out on paper from the written definitions
// (harness/report/*.h), and the writers' CSV header, rows and Markdown content.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/errors.h"
#include "common/statistics.h"
#include "harness/common/atomic_file.h"
#include "harness/records/iteration_record.h"
#include "harness/report/report.h"
#include "harness/report/report_speedup.h"
#include "harness/report/report_writers.h"
#include "tests/cpu/report_fixture.h"
#include "tests/support/run_command.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ReportFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(test::fresh_temp_dir("report_fixture"));
    dir_ = new fs::path(test::write_report_fixture(*root_));
    report_ = new Report(build_report(*dir_));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete report_;
    delete dir_;
    delete root_;
  }
  static const RunSummary& run(const std::string& name) {
    for (const RunSummary& r : report_->runs) {
      if (r.run == name) return r;
    }
    throw std::runtime_error("no run " + name);
  }
  static const MethodAggregate& group(const std::string& label) {
    for (const MethodAggregate& g : report_->methods) {
      if (g.label == label) return g;
    }
    throw std::runtime_error("no method group " + label);
  }
  static fs::path* root_;
  static fs::path* dir_;
  static Report* report_;
};
fs::path* ReportFixture::root_ = nullptr;
fs::path* ReportFixture::dir_ = nullptr;
Report* ReportFixture::report_ = nullptr;

TEST(SampleStats, QuantilesInterpolateLinearly) {
  EXPECT_DOUBLE_EQ(median_of({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median_of({7}), 7);
  const SampleStats s = *sample_stats({430, 390, 400});
  EXPECT_EQ(s.count, 3);
  EXPECT_DOUBLE_EQ(s.median, 400);
  EXPECT_DOUBLE_EQ(s.p25, 395);
  EXPECT_DOUBLE_EQ(s.p75, 415);
  EXPECT_DOUBLE_EQ(s.min, 390);
  EXPECT_DOUBLE_EQ(s.max, 430);
  EXPECT_FALSE(sample_stats({}).has_value());
}

TEST(ReportSpeedup, SweepPointsAgreeOutsideMethodAxes) {
  EXPECT_TRUE(same_non_method_point(json{{"seed", 1}}, json{{"seed", 1}, {"methods.dst.p", 0.1}}));
  EXPECT_FALSE(same_non_method_point(json{{"seed", 1}}, json{{"seed", 2}}));
  EXPECT_FALSE(same_non_method_point(json{{"seed", 1}}, json::object()));
}

TEST_F(ReportFixture, ListsRunsSkippingMovedAsideAndNonRunFolders) {
  ASSERT_EQ(report_->runs.size(), 14u);
  EXPECT_EQ(report_->manifest, "abl");
  EXPECT_EQ(report_->runs.front().run, "base__seed=1");
  EXPECT_EQ(report_->runs.back().run, "sim_sab__seed=3");
  ASSERT_EQ(report_->skipped.size(), 1u);
  EXPECT_NE(report_->skipped[0].find("sab__seed=1.interrupted-20260101T000000Z"), std::string::npos);
}

TEST_F(ReportFixture, RunSummaryFollowsTheDefinitions) {
  const RunSummary& b = run("base__seed=1");
  EXPECT_EQ(b.method, "base");
  EXPECT_TRUE(b.is_baseline);
  EXPECT_EQ(b.attention, "moba");
  EXPECT_EQ(b.budget_text(), "fixed");
  EXPECT_EQ(b.dp, 2);
  EXPECT_EQ(b.pp, 2);
  EXPECT_EQ(b.seed, 1);
  EXPECT_EQ(b.state, "complete");
  EXPECT_FALSE(b.simulated);
  EXPECT_EQ(b.profile_kind, "none");  // no profile in the method
  EXPECT_EQ(b.iterations_recorded, 4);
  EXPECT_EQ(b.iterations_measured, 3);
  ASSERT_TRUE(b.iter_ms);
  EXPECT_DOUBLE_EQ(b.iter_ms->median, 400);
  EXPECT_DOUBLE_EQ(b.iter_ms->min, 390);
  EXPECT_DOUBLE_EQ(b.iter_ms->max, 430);
  EXPECT_DOUBLE_EQ(b.iter_ms->p25, 395);
  EXPECT_DOUBLE_EQ(b.iter_ms->p75, 415);
  EXPECT_DOUBLE_EQ(b.imbalance->median, 1.2);
  EXPECT_DOUBLE_EQ(b.imbalance->min, 1.1);
  EXPECT_DOUBLE_EQ(b.imbalance->max, 1.5);
  EXPECT_DOUBLE_EQ(*b.bubble_fraction_mean, 0.2);
  EXPECT_DOUBLE_EQ(*b.bubble_fraction_max, 0.5);
  EXPECT_DOUBLE_EQ(*b.overhead_ms, 2);
  EXPECT_DOUBLE_EQ(*b.overhead_pct, 0.5);  // 2 / 400
  EXPECT_DOUBLE_EQ(*b.allreduce_ms, 4);
  EXPECT_DOUBLE_EQ(*b.tokens_per_s, 6000.0 / 1220.0 * 1000.0);
  EXPECT_DOUBLE_EQ(*b.loss_first, 5);
  EXPECT_DOUBLE_EQ(*b.loss_final, 2);
  EXPECT_FALSE(b.coverage_mean);  // absent data stays absent
  EXPECT_FALSE(b.budget_mean);
  EXPECT_FALSE(b.effective_budget_mean);
  EXPECT_FALSE(b.prediction_mape);
  EXPECT_FALSE(b.runqueue_wait_pct);  // records without run-queue waits
  EXPECT_EQ(b.accuracy, (std::map<std::string, double>{{"longbench_avg", 40.0}, {"niah_score", 0.95}}));

  const RunSummary& d = run("dst__anchor=mean__p=0.1__seed=1");
  EXPECT_EQ(d.budget_text(), "dst(anchor=mean,p=0.1)");
  EXPECT_EQ(d.dst_raise, "anchor");  // the fixture's resolved manifest predates the key
  RunSummary slack = d;
  slack.dst_raise = "dp_slack";
  EXPECT_EQ(slack.budget_text(), "dst(anchor=mean,p=0.1,raise=dp_slack)");
  EXPECT_EQ(d.profile_kind, "analytic");
  EXPECT_DOUBLE_EQ(*d.coverage_mean, 0.85);  // (0.9 + 0.8 + 0.9 + 0.8 + 0.85) / 5
  EXPECT_DOUBLE_EQ(*d.budget_mean, 40);      // (32 + 48 + 32 + 48 + 40) / 5, 0 -> top_k 32
  // Layers of the measured iterations: 33 35 48 48, twice, then 40 44; the warm-up's excluded.
  EXPECT_DOUBLE_EQ(*d.effective_budget_mean, (2 * (33 + 35 + 48 + 48) + 40 + 44) / 10.0);
  EXPECT_DOUBLE_EQ(*run("sab__seed=1").prediction_mape, 14.0);  // (10 + 25 + 10 + 25 + 0) / 5
  // Only the iterations that carry waits count (report_fixture.h).
  EXPECT_DOUBLE_EQ(*run("sab__seed=1").runqueue_wait_pct, 100.0 * 366.0 / (4.0 * 670.0));
  EXPECT_DOUBLE_EQ(*run("sab__seed=2").runqueue_wait_pct, 100.0 * 240.0 / (4.0 * 770.0));
  EXPECT_EQ(run("lbb__seed=1").state, "incomplete");
  EXPECT_TRUE(run("sim_sab__seed=3").simulated);
}

TEST_F(ReportFixture, SpeedupsAgainstTheBaselineAtTheSameSeed) {
  EXPECT_DOUBLE_EQ(*run("base__seed=1").speedup, 1.0);
  EXPECT_DOUBLE_EQ(*run("sab__seed=1").speedup, 400.0 / 320.0);
  EXPECT_EQ(run("sab__seed=2").speedup_baseline_run, "base__seed=2");
  EXPECT_DOUBLE_EQ(*run("sab__seed=2").speedup, 2.0);
  EXPECT_DOUBLE_EQ(*run("dst__anchor=mean__p=0.1__seed=1").speedup, 1.6);
  EXPECT_DOUBLE_EQ(*run("dst__anchor=mean__p=0.1__seed=2").speedup, 2.0);
  EXPECT_DOUBLE_EQ(*run("dst__anchor=max__p=0.2__seed=2").speedup, 1.0);
  EXPECT_DOUBLE_EQ(*run("lbb__seed=1").speedup, 400.0 / 300.0);  // itself incomplete, baseline complete
  // 95 % intervals: the baseline's own is [1, 1]; a run's holds its speedup.
  EXPECT_EQ(run("base__seed=1").speedup_interval->low, 1.0);
  EXPECT_EQ(run("base__seed=1").speedup_interval->high, 1.0);
  const SpeedupInterval& sab = *run("sab__seed=1").speedup_interval;
  EXPECT_TRUE(sab.includes(400.0 / 320.0));
  EXPECT_LT(sab.low, sab.high);
  const RunSummary& sim = run("sim_sab__seed=3");
  EXPECT_FALSE(sim.speedup);
  EXPECT_FALSE(sim.speedup_interval);
  EXPECT_NE(sim.speedup_note.find("no run of the baseline method base"), std::string::npos) << sim.speedup_note;
}

TEST(ReportInterleave, OneSentencePerInterleavedGroupWithItsBlocksRunQueueWait) {
  // Runs a and b took turns in blocks of 5; c trained alone. Per block, over a and b
  // (waited ms / ranks' ms): block 0 (10 + 30) / 2000 = 2 %, block 1 (0 + 20) / 2000 =
  // 1 %, block 2 (60 + 60) / 2000 = 6 %: median 2 %, range 1-6 %.
  RunSummary::Interleaving a_side{5, {"a", "b"}, {{0, {10, 1000}}, {1, {0, 1000}}, {2, {60, 1000}}}};
  RunSummary::Interleaving b_side{5, {"a", "b"}, {{0, {30, 1000}}, {1, {20, 1000}}, {2, {60, 1000}}}};
  RunSummary a, b, c;
  a.run = "a";
  a.interleave = a_side;
  b.run = "b";
  b.interleave = b_side;
  c.run = "c";
  const std::vector<std::string> notes = interleave_notes({a, c, b});
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0],
            "a, b trained interleaved, taking turns in blocks of 5 iterations in alternating order (ABBA); their "
            "ranks' run-queue wait per block: median 2.0 %, 1.0-6.0 % over 3 blocks.");
  EXPECT_TRUE(interleave_notes({c}).empty()) << "runs trained one after another: nothing to say";
  const json j = run_summary_to_json(a);
  EXPECT_EQ(j["interleave"]["block_iterations"], 5);
  EXPECT_DOUBLE_EQ(j["interleave"]["blocks"][2]["runqueue_wait_pct"].get<double>(), 6.0);
  EXPECT_TRUE(run_summary_to_json(c)["interleave"].is_null());
}

TEST(ReportImbalance, SaysWhenALayoutCannotMoveAnImbalanceColumn) {
  const auto complete = [](const std::string& name, int64_t dp, int64_t samples) {
    RunSummary r;
    r.run = name;
    r.state = "complete";
    r.dp = dp;
    r.max_samples_per_microbatch = samples;
    return r;
  };
  RunSummary incomplete = complete("late", 1, 1);
  incomplete.state = "incomplete";
  // dp 1 everywhere (table1-cpu-pp2's layout), one sample per micro-batch in one run.
  std::vector<std::string> notes = imbalance_layout_notes({complete("a", 1, 1), complete("b", 1, 0), incomplete});
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0], "Slot imbalance (Table I's imbalance column) is 1 by construction with one DP rank: this layout "
                      "cannot show what balancing between DP ranks does (Table I's has dp 2). dp 1: every run here.");
  EXPECT_NE(notes[1].find("moves only with the attention budgets (DST). One sample per micro-batch: a."),
            std::string::npos)
      << notes[1];
  // Table I's own layout (dp 2, several samples a micro-batch): nothing to say.
  EXPECT_TRUE(imbalance_layout_notes({complete("a", 2, 0), complete("b", 2, 0)}).empty());
}

TEST(ReportContention, OneWarningForOneRunOrForAll) {
  RunSummary quiet, busy, busier;
  quiet.run = "quiet";
  quiet.runqueue_wait_pct = 9.9;
  busy.run = "busy";
  busy.runqueue_wait_pct = 12.0;
  busier.run = "busier";
  busier.runqueue_wait_pct = 17.3;
  EXPECT_TRUE(contention_notes({quiet}).empty());
  const std::vector<std::string> one = contention_notes({quiet, busy});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_NE(one[0].find("WARNING: busy: its ranks waited 12.0% of their time"), std::string::npos) << one[0];
  EXPECT_NE(one[0].find("(`run --only busy --force`)"), std::string::npos) << one[0];
  const std::vector<std::string> both = contention_notes({busy, quiet, busier});
  ASSERT_EQ(both.size(), 1u);
  EXPECT_NE(both[0].find("WARNING: 2 runs' ranks waited more than 10.0% of their time for a free CPU core "
                         "(runqueue_wait_pct): busy 12.0%, busier 17.3%. "),
            std::string::npos)
      << both[0];
}

TEST(ReportSpeedup, IncompleteBaselineGivesNoSpeedup) {
  RunSummary base, method;
  base.run = "base";
  base.method = "base";
  base.baseline_method = "base";
  base.state = "incomplete";
  base.iter_ms = sample_stats({100});
  method = base;
  method.run = "m";
  method.method = "m";
  method.state = "complete";
  std::vector<RunSummary> runs = {base, method};
  attach_speedups(runs);
  EXPECT_FALSE(runs[1].speedup);
  EXPECT_EQ(runs[1].speedup_note, "baseline run base is incomplete");
}

TEST_F(ReportFixture, MethodAggregatesOverSeeds) {
  std::vector<std::string> labels;
  for (const MethodAggregate& g : report_->methods) labels.push_back(g.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"base", "dst (anchor=max, p=0.1)", "dst (anchor=max, p=0.2)",
                                              "dst (anchor=mean, p=0.1)", "dst (anchor=mean, p=0.2)", "sab",
                                              "sim_sab"}));  // lbb: incomplete, left out
  const MethodAggregate& base = group("base");
  EXPECT_EQ(base.runs.size(), 2u);
  EXPECT_DOUBLE_EQ(base.speedup->median, 1.0);
  EXPECT_DOUBLE_EQ(base.iter_ms->median, 450);
  EXPECT_DOUBLE_EQ(base.iter_ms->min, 400);
  EXPECT_DOUBLE_EQ(base.iter_ms->max, 500);
  const MethodAggregate& sab = group("sab");
  EXPECT_DOUBLE_EQ(sab.speedup->median, (1.25 + 2.0) / 2);
  EXPECT_DOUBLE_EQ(sab.speedup->min, 1.25);
  EXPECT_DOUBLE_EQ(sab.speedup->max, 2.0);
  EXPECT_EQ(sab.speedup->count, 2);
  // Over the two seeds' runs and their iterations: it holds the median speedup, and it
  // spans more than the two runs' medians (1.25 and 2), which the runs' noise widens.
  ASSERT_TRUE(sab.speedup_interval);
  EXPECT_TRUE(sab.speedup_interval->includes(sab.speedup->median));
  EXPECT_LT(sab.speedup_interval->low, 1.25);
  EXPECT_GT(sab.speedup_interval->high, 2.0);
  EXPECT_EQ(base.speedup_interval->low, 1.0);
  EXPECT_FALSE(group("sim_sab").speedup_interval);
  EXPECT_DOUBLE_EQ(sab.overhead_ms->median, 2.0);
  const MethodAggregate& mean01 = group("dst (anchor=mean, p=0.1)");
  EXPECT_DOUBLE_EQ(mean01.speedup->median, 1.8);
  EXPECT_DOUBLE_EQ(mean01.accuracy.at("niah_score").median, 0.85);
  EXPECT_DOUBLE_EQ(mean01.accuracy.at("niah_score").min, 0.8);
  EXPECT_EQ(mean01.accuracy.at("niah_score").count, 2);
  EXPECT_FALSE(group("sim_sab").speedup);
}

TEST_F(ReportFixture, AblationGridOfMediansOverSeeds) {
  ASSERT_EQ(report_->ablation.size(), 1u);
  const AblationTable& t = report_->ablation[0];
  EXPECT_EQ(t.method, "dst");
  EXPECT_EQ(t.anchors, (std::vector<std::string>{"mean", "max"}));
  EXPECT_EQ(t.ps, (std::vector<double>{0.1, 0.2}));
  EXPECT_EQ(t.metrics, (std::vector<std::string>{"speedup", "imbalance", "effective_budget_mean", "loss_final",
                                                 "longbench_avg", "niah_score"}));
  EXPECT_DOUBLE_EQ(*t.values[0][0][0], 1.8);
  EXPECT_DOUBLE_EQ(*t.values[0][0][1], 2.0);
  EXPECT_DOUBLE_EQ(*t.values[0][1][0], 1.25);
  EXPECT_DOUBLE_EQ(*t.values[0][1][1], 1.0);
  EXPECT_DOUBLE_EQ(*t.values[1][1][1], 1.2);
  EXPECT_DOUBLE_EQ(*t.values[5][0][0], 0.85);
  EXPECT_DOUBLE_EQ(*t.values[5][1][0], 0.7);
  // Each cell's speedup interval is its method group's (the same runs).
  for (size_t a = 0; a < t.anchors.size(); ++a) {
    for (size_t p = 0; p < t.ps.size(); ++p) {
      const std::string label = "dst (anchor=" + t.anchors[a] + ", p=" + (p == 0 ? "0.1" : "0.2") + ")";
      ASSERT_TRUE(t.speedup_intervals[a][p]) << label;
      EXPECT_EQ(t.speedup_intervals[a][p]->low, group(label).speedup_interval->low) << label;
      EXPECT_EQ(t.speedup_intervals[a][p]->high, group(label).speedup_interval->high) << label;
    }
  }
  // The budget the layers ran and the last training loss: medians of the runs' own fields.
  for (size_t a = 0; a < t.anchors.size(); ++a) {
    for (size_t p = 0; p < t.ps.size(); ++p) {
      std::vector<double> budgets, losses;
      for (const RunSummary& r : report_->runs) {
        if (!r.dst_anchor || *r.dst_anchor != t.anchors[a] || *r.dst_p != t.ps[p] || r.method != "dst") continue;
        if (r.effective_budget_mean) budgets.push_back(*r.effective_budget_mean);
        if (r.loss_final) losses.push_back(*r.loss_final);
      }
      ASSERT_FALSE(budgets.empty());
      ASSERT_FALSE(losses.empty());
      EXPECT_DOUBLE_EQ(*t.values[2][a][p], median_of(budgets));
      EXPECT_DOUBLE_EQ(*t.values[3][a][p], median_of(losses));
    }
  }
  EXPECT_EQ(t.runs, (std::vector<std::vector<int64_t>>{{2, 2}, {2, 2}}));
  const json j = ablation_table_to_json(t);
  EXPECT_DOUBLE_EQ(j["values"]["niah_score"][0][0].get<double>(), 0.85);
}

TEST_F(ReportFixture, JsonCarriesRunsMethodsAblationAndContext) {
  const json j = report_to_json(*report_);
  EXPECT_EQ(j["manifest"], "abl");
  EXPECT_EQ(j["accuracy_columns"], (json{"longbench_avg", "niah_score"}));
  const json& first = j["runs"][0];
  EXPECT_EQ(first["run"], "base__seed=1");
  EXPECT_DOUBLE_EQ(first["iter_ms"]["p75"].get<double>(), 415);
  EXPECT_DOUBLE_EQ(first["iter_ms_median"].get<double>(), first["iter_ms"]["median"].get<double>());
  EXPECT_DOUBLE_EQ(first["bubble_fraction"]["max"].get<double>(), 0.5);
  EXPECT_TRUE(first["coverage_mean"].is_null());
  EXPECT_TRUE(first["dst"].is_null());
  EXPECT_DOUBLE_EQ(first["accuracy"]["niah_score"].get<double>(), 0.95);
  const json& sim = j["runs"][13];
  EXPECT_TRUE(sim["speedup"].is_null());
  EXPECT_TRUE(sim["simulated"].get<bool>());
  EXPECT_EQ(j["methods"][5]["label"], "sab");
  EXPECT_DOUBLE_EQ(j["methods"][5]["speedup"]["max"].get<double>(), 2.0);
  EXPECT_EQ(j["methods"][5]["count"], 2);
  EXPECT_EQ(j["ablation"][0]["anchors"], (json{"mean", "max"}));
  EXPECT_EQ(j["context"]["git_shas"], (json{"aaa111", "bbb222"}));
  EXPECT_TRUE(j["context"]["git_shas_differ"].get<bool>());
  EXPECT_EQ(j["context"]["runs"]["base__seed=1"]["host"], "node1");
  EXPECT_FALSE(j["context"]["sparsebalance"]["version"].get<std::string>().empty());
}

TEST_F(ReportFixture, CsvHeaderAndRow) {
  const std::string csv = report_to_csv(*report_);
  const std::string header =
      "run,method,attention,batching,budget,dst_anchor,dst_p,dst_raise,dp,pp,cp,tp,cp_layout,seed,state,simulated,profile_kind,"
      "iterations_recorded,iterations_measured,iter_ms_median,iter_ms_min,iter_ms_max,iter_ms_p25,iter_ms_p75,"
      "speedup,speedup_low,speedup_high,speedup_baseline_run,imbalance_median,imbalance_min,imbalance_max,imbalance_p25,imbalance_p75,"
      "dp_imbalance_median,slot_imbalance_median,cp_worker_imbalance_median,cp_work_imbalance_median,bubble_fraction_mean,bubble_fraction_max,overhead_ms,overhead_pct,allreduce_ms,tokens_per_s,loss_first,"
      "loss_final,coverage_mean,budget_mean,effective_budget_mean,reference_budget_mean,prediction_mape,runqueue_wait_pct,git_sha,"
      "longbench_avg,niah_score\n";
  ASSERT_EQ(csv.substr(0, header.size()), header);
  EXPECT_NE(csv.find("\nbase__seed=1,base,moba,sequential,fixed,,,,2,2,1,1,,1,complete,false,none,4,3,400,390,430,395,415,"
                     "1,1,1,base__seed=1,1.2,1.1,1.5,1.15,1.35,,,,,0.2,0.5,2,0.5,4,4918.032787,5,2,,,,,,,aaa111,40,0.95\n"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find("\nsab__seed=1,sab,moba,sab,fixed,,,,2,2,1,1,,1,complete,false,none,4,3,320,310,350,315,335,1.25,"),
            std::string::npos);
  EXPECT_NE(csv.find(",0.2,0.5,2,0.625,4,6122.44898,5,2,,,,,14,13.65671642,aaa111,,\n"), std::string::npos)
      << csv;  // sab seed 1
  EXPECT_NE(csv.find("\nsim_sab__seed=3,sim_sab,moba,sequential,fixed,,,,2,2,1,1,,3,complete,true,"), std::string::npos);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 15);
}

TEST_F(ReportFixture, MarkdownTablesNotesAndContext) {
  Report fixed_time = *report_;
  fixed_time.provenance = {"2026-01-01T00:00:00Z", "0.1.0", "cafe", false, "Release"};
  const std::string md = report_to_markdown(fixed_time);
  for (const char* expected : {
           "# abl\n\n14 runs, 13 complete.",
           "| config | budget | dp x pp | state | imbalance | DP / slot imbalance | iteration ms | speedup | "
           "overhead ms (%) | bubble (mean / max) | tokens/s | loss final | longbench_avg | niah_score |\n",
           // The fixture's records predate the DP / slot imbalances: "-".
           "| base__seed=1 | fixed | 2 x 2 | complete | 1.200 | - / - | 400.00 | 1.00 [1.00, 1.00] | 2.00 (0.50%) | 0.200 / 0.500 "
           "| 4918 | 2.0000 | 40.0000 | 0.9500 |\n",
           "| dst__anchor=mean__p=0.1__seed=1 | dst(anchor=mean,p=0.1) | 2 x 2 | complete | 1.200 | - / - | 250.00 | 1.60 [1.54, 1.62] |",
           "| sim_sab__seed=3 † | fixed | 2 x 2 | complete | 1.200 | - / - | 200.00 | - |",
           // Table I's column first: slot imbalance ("-": the fixture predates it), then the
           // micro-batch imbalance.
           "| method | runs | speedup | speedup 95 % interval | iteration ms | slot imbalance | micro-batch imbalance | "
           "bubble (mean) | overhead ms |",
           "| sab | 2 | 1.62 [1.25, 2.00] | [1.24, 2.02] | 285.00 [250.00, 320.00] | - | 1.200 [1.200, 1.200] |",
           // In words: a method whose interval holds 1.0, and the overlaps (one sentence per method).
           "- dst (anchor=max, p=0.2): its speedup's 95 % interval [1.00, 1.00] includes 1.0: not distinguishable "
           "from the baseline in these runs.\n",
           "- dst (anchor=mean, p=0.2) [1.88, 2.05] overlaps sab [1.24, 2.02]: the speedup differences between them "
           "are within the noise.\n",
           "## DST ablation: dst",
           // The cells' intervals are the method groups' (one group per cell here).
           "speedup:\n\n| anchor \\ p | 0.1 | 0.2 |\n|---|---:|---:|\n| mean | 1.80 [1.57, 2.02] | 2.00 [1.88, 2.05] |\n"
           "| max | 1.25 [1.23, 1.26] | 1.00 [1.00, 1.00] |\n",
           "niah_score:\n\n| anchor \\ p | 0.1 | 0.2 |\n|---|---:|---:|\n| mean | 0.8500 | 0.7000 |\n",
           "- † simulated run:",
           "- lbb__seed=1 is incomplete (no status.json): left out of the aggregates.",
           "- sim_sab__seed=3: no speedup: no run of the baseline method base at sweep point {\"seed\":3}.",
           "- WARNING: sab__seed=1: its ranks waited 13.7% of their time for a free CPU core (runqueue_wait_pct)",
           "(`run --only sab__seed=1 --force`).",
           "- skipped sab__seed=1.interrupted-20260101T000000Z: moved aside by a rerun (interrupted).",
           "- report: generated 2026-01-01T00:00:00Z by sparsebalance 0.1.0 (cafe, Release)",
           "- WARNING: the runs were built from 2 different commits: aaa111 (base__seed=1,",
           "bbb222 (sim_sab__seed=3);",
           "- host: node1\n",
       }) {
    EXPECT_NE(md.find(expected), std::string::npos) << "missing: " << expected << "\n---\n" << md;
  }
  EXPECT_EQ(md.find("- WARNING: sab__seed=2"), std::string::npos) << "7.8 % is below the threshold";
}

TEST_F(ReportFixture, WriteReportWritesThreeFiles) {
  write_report(*dir_);
  for (const char* file : {"report.json", "report.csv", "report.md"}) {
    EXPECT_TRUE(fs::exists(*dir_ / file)) << file;
  }
  EXPECT_EQ(json::parse(read_file(*dir_ / "report.json"))["runs"].size(), 14u);
  EXPECT_EQ(read_file(*dir_ / "report.csv"), report_to_csv(*report_));
}

TEST(Report, FolderWithoutRunsIsAConfigErrorNamingIt) {
  const fs::path dir = test::fresh_temp_dir("report_empty");
  fs::create_directories(dir / "plots");
  try {
    build_report(dir);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), dir.string());
    EXPECT_NE(e.problem().find("holds no run folders"), std::string::npos);
  }
  fs::remove_all(dir);
}

// A broken line fails that run's record check (named with file:line), not the report.
TEST(Report, BrokenRecordLineNamesFileAndLine) {
  const fs::path root = test::fresh_temp_dir("report_broken");
  test::FixtureRun f{"base__seed=1", "base", {{"seed", 1}}, 100.0};
  test::write_fixture_run(root / "m" / f.name, f);
  std::ofstream(root / "m" / f.name / "records.jsonl", std::ios::app) << "{\"iteration\": 4, \"lo\n";
  const Report report = build_report(root / "m");
  ASSERT_EQ(report.runs_failing_checks(), std::vector<std::string>{f.name});
  EXPECT_NE(report.runs[0].records_problem.find("records.jsonl:5"), std::string::npos) << report.runs[0].records_problem;
  EXPECT_EQ(report.runs[0].state, "invalid records");
  EXPECT_FALSE(report.runs[0].iter_ms.has_value());
  fs::remove_all(root);
}

TEST(IterationRecord, DerivedMetricsFollowTheirDefinitions) {
  IterationRecord r;
  r.iter_ms = 100.0;
  r.microbatch_ms = {10.0, 30.0, 20.0};
  r.derive_single_stage_metrics();
  EXPECT_DOUBLE_EQ(r.imbalance, 30.0 / 20.0);
  EXPECT_EQ(r.per_stage_busy_ms, (std::vector<double>{60.0}));
  EXPECT_EQ(r.per_stage_idle_ms, (std::vector<double>{40.0}));
  EXPECT_DOUBLE_EQ(r.bubble_fraction, 0.4);
  IterationRecord back = iteration_record_from_json(iteration_record_to_json(r));
  EXPECT_EQ(iteration_record_to_json(back), iteration_record_to_json(r));
}

}  // namespace
}  // namespace sb
