// `sparsebalance bench attention` end to end on a small shape: one JSON object per
// implementation with the documented fields, errors against the float64 oracle at
// float32 rounding, and usage errors that name the flag (exit 2).

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "tests/support/run_command.h"

namespace sb {
namespace {

using test::run_command;
using test::sparsebalance_binary;

std::vector<nlohmann::json> json_lines(const std::string& output) {
  std::vector<nlohmann::json> objects;
  std::istringstream stream(output);
  std::string line;
  while (std::getline(stream, line)) {
    if (!line.empty() && line.front() == '{') objects.push_back(nlohmann::json::parse(line));
  }
  return objects;
}

TEST(MobaBenchCli, JsonHasTheDocumentedFieldsForBothImplementations) {
  const auto r = run_command(sparsebalance_binary() +
                             " bench attention --impl dense,moba --seq-len 300 --block 32 "
                             "--top-k 3 --heads 4/2 --head-dim 16 --backward --json "
                             "--repetitions 3 --warmup 1 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto objects = json_lines(r.output);
  ASSERT_EQ(objects.size(), 2u) << r.output;
  EXPECT_EQ(objects[0]["impl"], "dense");
  EXPECT_EQ(objects[1]["impl"], "moba");
  for (const auto& j : objects) {
    for (const char* key : {"impl", "device", "seq_len", "block", "top_k", "fwd_ms", "fwdbwd_ms",
                            "max_abs_err", "peak_mem_bytes", "fwd_tflops", "fwdbwd_tflops",
                            "fwd_samples_ms", "context"}) {
      EXPECT_TRUE(j.contains(key)) << key << " missing in " << j.dump();
    }
    EXPECT_EQ(j["device"], "cpu");
    EXPECT_EQ(j["seq_len"], 300);
    EXPECT_EQ(j["fwd_samples_ms"].size(), 3u);
    EXPECT_EQ(j["fwdbwd_samples_ms"].size(), 3u);
    EXPECT_GT(j["fwd_ms"].get<double>(), 0.0);
    EXPECT_GE(j["fwd_ms"].get<double>(), j["fwd_ms_min"].get<double>());
    EXPECT_LE(j["fwd_ms"].get<double>(), j["fwd_ms_max"].get<double>());
    EXPECT_LT(j["max_abs_err"].get<double>(), 1e-5) << "float32 against the float64 reference";
    EXPECT_EQ(j["checked_rows"], 300) << "the whole sequence fits the oracle";
    for (const char* key : {"host", "threads", "libtorch", "git_sha", "build_type"}) {
      EXPECT_TRUE(j["context"].contains(key)) << key;
    }
  }
  // MoBA attends fewer pairs than dense causal attention on the same shape.
  EXPECT_LT(objects[1]["attended_pairs"].get<double>(), objects[0]["attended_pairs"].get<double>());
  EXPECT_DOUBLE_EQ(objects[0]["attended_pairs"].get<double>(), 4.0 * 300 * 301 / 2);
}

TEST(MobaBenchCli, VerticalSlashIsCheckedAgainstItsReference) {
  // 300 tokens, 20 verticals and 4 slashes besides the 30 sinks and 100-offset window,
  // in blocks of 16, on the RoPE-local inputs: fewer pairs than dense causal, the output
  // within float32 of the float64 reference on every row, and its knobs in the JSON.
  const auto r = run_command(sparsebalance_binary() +
                             " bench attention --impl dense,vertical_slash --seq-len 300 --vs-verticals 20 "
                             "--vs-slashes 4 --vs-block 16 --inputs local --heads 4/2 --head-dim 16 --backward "
                             "--json --repetitions 2 --warmup 0 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto objects = json_lines(r.output);
  ASSERT_EQ(objects.size(), 2u) << r.output;
  const auto& vs = objects[1];
  EXPECT_EQ(vs["impl"], "vertical_slash");
  EXPECT_EQ(vs["vs_verticals"], 20);
  EXPECT_EQ(vs["vs_slashes"], 4);
  EXPECT_EQ(vs["vs_block"], 16);
  EXPECT_EQ(vs["inputs"], "local");
  EXPECT_EQ(vs["checked_rows"], 300);
  EXPECT_LT(vs["max_abs_err"].get<double>(), 1e-5);
  EXPECT_GT(vs["attended_pairs"].get<double>(), 0.0);
  EXPECT_LT(vs["attended_pairs"].get<double>(), objects[0]["attended_pairs"].get<double>());
  EXPECT_LT(vs["coverage_mean"].get<double>(), 1.0);
  // On CUDA the pattern runs on the fused kernels, which take bf16 / fp16 only.
  const auto cuda = run_command(sparsebalance_binary() +
                                " bench attention --impl vertical_slash --device cuda --dtype float32 2>&1");
  EXPECT_EQ(cuda.exit_code, 2) << cuda.output;
  EXPECT_NE(cuda.output.find("--dtype bfloat16 or float16"), std::string::npos) << cuda.output;
}

TEST(MobaBenchCli, TheRingsVerticalSlashIsTheOneRankPatterns) {
  // The CP ring on one rank, its index built as CP ranks build it: the same pairs and
  // coverage as the one-rank pattern, its output within float32 of the reference.
  const auto r = run_command(sparsebalance_binary() +
                             " bench attention --impl vertical_slash,ring-vertical_slash --seq-len 300 "
                             "--vs-verticals 20 --vs-slashes 4 --vs-block 16 --inputs local --heads 4/2 --head-dim 16 "
                             "--backward --json --repetitions 2 --warmup 0 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto objects = json_lines(r.output);
  ASSERT_EQ(objects.size(), 2u) << r.output;
  const auto &one = objects[0], &ring = objects[1];
  EXPECT_EQ(ring["impl"], "ring-vertical_slash");
  EXPECT_EQ(ring["attended_pairs"].get<double>(), one["attended_pairs"].get<double>());
  EXPECT_NEAR(ring["coverage_mean"].get<double>(), one["coverage_mean"].get<double>(), 1e-12);
  EXPECT_LT(ring["coverage_mean"].get<double>(), 1.0);
  EXPECT_LT(ring["max_abs_err"].get<double>(), 1e-5);
  EXPECT_GT(ring["index_ms"].get<double>(), 0.0);
  const auto cuda = run_command(sparsebalance_binary() + " bench attention --impl ring-vertical_slash --device cuda 2>&1");
  EXPECT_EQ(cuda.exit_code, 2) << cuda.output;
  EXPECT_NE(cuda.output.find("CPU only"), std::string::npos) << cuda.output;
}

TEST(MobaBenchCli, TableNamesTheTimeRatio) {
  const auto r = run_command(sparsebalance_binary() +
                             " bench attention --impl dense,moba --seq-len 128 --block 32 "
                             "--top-k 2 --heads 2/1 --head-dim 16 --repetitions 1 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("dense / moba time ratio"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("LibTorch"), std::string::npos) << r.output;
}

TEST(MobaBenchCli, UsageErrorsExitTwoAndNameTheFlag) {
  for (const auto& [flags, needle] : std::vector<std::pair<std::string, std::string>>{
           {"--impl sparse", "--impl"},
           {"--heads 4", "--heads"},
           {"--heads 3/2", "--heads"},
           {"--block 0", "--block"},
           {"--dtype float8", "--dtype"},
           {"--device tpu", "--device"},
           {"--impl vertical_slash --vs-block 0", "--vs-block"},
           {"--impl vertical_slash --vs-p 1.5", "--vs-p"},
           {"--inputs sorted", "--inputs"}}) {
    const auto r = run_command(sparsebalance_binary() + " bench attention --seq-len 64 " + flags);
    EXPECT_EQ(r.exit_code, 2) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << flags << "\n" << r.output;
  }
  EXPECT_EQ(run_command(sparsebalance_binary() + " bench").exit_code, 2);
  EXPECT_EQ(run_command(sparsebalance_binary() + " bench attention --help").exit_code, 0);
}

}  // namespace
}  // namespace sb
