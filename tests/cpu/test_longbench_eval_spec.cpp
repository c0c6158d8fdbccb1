// The manifest's `eval` block: strict parsing (unknown keys and wrong types name their
// JSON path), defaults, relative paths, and the round trip through JSON.
#include <gtest/gtest.h>

#include "common/errors.h"
#include "harness/eval/eval_spec.h"

namespace sb {
namespace {

using nlohmann::json;

EvalSpec parse(const json& j) { return parse_eval_spec(j, "$.eval", "m.json", "/base"); }

std::string error_path(const json& j) {
  try {
    parse(j);
  } catch (const ConfigError& e) {
    return e.json_path() + " | " + e.problem();
  }
  return "no error";
}

TEST(EvalSpec, FullBlockWithDefaultsAndRelativePaths) {
  const EvalSpec spec = parse(json::parse(R"({
    "system_prompt": null,
    "longbench": {"data": "lb/data", "config": "/abs/config", "tasks": ["qasper", "lcc"], "limit": 3},
    "longbench_v2": {"data": "v2/data.json", "config": "cfg"},
    "niah": {"lengths": [128, 256], "depths": [0, 50.5, 100], "samples": 2},
    "heldout": {"data": "held.jsonl", "max_length": 512}
  })"));
  EXPECT_TRUE(spec.chat.chat);
  EXPECT_FALSE(spec.chat.system_prompt.has_value());
  ASSERT_TRUE(spec.longbench);
  EXPECT_EQ(spec.longbench->data_dir, "/base/lb/data");
  EXPECT_EQ(spec.longbench->config_dir, "/abs/config");
  EXPECT_EQ(spec.longbench->tasks, (std::vector<std::string>{"qasper", "lcc"}));
  EXPECT_EQ(spec.longbench->max_length, 31500);
  EXPECT_EQ(spec.longbench->limit, 3);
  EXPECT_EQ(spec.longbench_v2->max_new_tokens, 128);
  EXPECT_EQ(spec.niah->haystack, "synthetic");
  EXPECT_EQ(spec.niah->depths, (std::vector<double>{0, 50.5, 100}));
  EXPECT_EQ(spec.heldout->window, 512);
  const json resolved = eval_spec_to_json(spec);
  EXPECT_EQ(eval_spec_to_json(parse(resolved)), resolved);
  EXPECT_TRUE(resolved["system_prompt"].is_null());
}

TEST(EvalSpec, DefaultTaskListsAreUpstreams) {
  const EvalSpec v1 = parse(json::parse(R"({"longbench": {"data": "d", "config": "c"}})"));
  EXPECT_EQ(v1.longbench->tasks.size(), 21u);
  EXPECT_EQ(v1.chat.system_prompt, std::string(kQwenDefaultSystemPrompt));
  const EvalSpec e = parse(json::parse(R"({"longbench": {"data": "d", "config": "c", "longbench_e": true}})"));
  EXPECT_EQ(e.longbench->tasks.size(), 13u);
}

TEST(EvalSpec, ErrorsNameTheJsonPath) {
  EXPECT_EQ(error_path(json::parse(R"({"niah": {"lenghts": [1]}})")).substr(0, 20), "$.eval.niah.lenghts ");
  EXPECT_NE(error_path(json::parse(R"({"niah": {"lengths": [1]}})")).find("$.eval.niah.lengths"), std::string::npos);
  EXPECT_NE(error_path(json::parse(R"({"niah": {"lengths": ["x"]}})")).find("$.eval.niah.lengths[0]"), std::string::npos);
  EXPECT_NE(error_path(json::parse(R"({"longbench": {"data": "d"}})")).find("$.eval.longbench.config"), std::string::npos);
  EXPECT_NE(error_path(json::parse(R"({"longbench": {"data": "d", "config": "c", "tasks": ["nope"]}})"))
                .find("$.eval.longbench.tasks[0]"), std::string::npos);
  EXPECT_NE(error_path(json::parse(R"({"longbench": {"data": "d", "config": "c", "longbench_e": true,
                                      "tasks": ["narrativeqa"]}})")).find("not a LongBench-E task"),
            std::string::npos);
  EXPECT_NE(error_path(json::parse(R"({"chat": "yes", "heldout": {"data": "x"}})")).find("$.eval.chat"),
            std::string::npos);
  EXPECT_NE(error_path(json::object()).find("nothing to evaluate"), std::string::npos);
  EXPECT_NE(error_path(json::parse(R"({"heldout": {"data": "x", "limit": -1}})")).find("$.eval.heldout.limit"),
            std::string::npos);
  EXPECT_NE(error_path(json::parse(R"({"heldout": {"data": "x", "max_length": 64, "stride": 64}})"))
                .find("$.eval.heldout.stride"),
            std::string::npos);
  EXPECT_NE(error_path(json::parse(R"({"heldout": {"data": "x", "bucket_tokens": -8}})"))
                .find("$.eval.heldout.bucket_tokens"),
            std::string::npos);
}

TEST(EvalSpec, ZeroShotDefaultsToEveryTaskAndNamesAnUnknownOne) {
  const EvalSpec spec = parse(json::parse(R"({"zeroshot": {"data": "zs"}})"));
  ASSERT_TRUE(spec.zeroshot);
  EXPECT_EQ(spec.zeroshot->data_dir, std::filesystem::path("/base/zs"));
  EXPECT_EQ(spec.zeroshot->tasks, (std::vector<std::string>{"arc_easy", "arc_challenge", "boolq", "hellaswag", "piqa",
                                                            "winogrande", "openbookqa"}));
  const json resolved = eval_spec_to_json(parse(json::parse(R"({"zeroshot": {"data": "zs", "tasks": ["piqa"],
                                                                "limit": 5}})")));
  EXPECT_EQ(resolved["zeroshot"]["tasks"], json::array({"piqa"}));
  EXPECT_EQ(resolved["zeroshot"]["limit"], 5);
  EXPECT_EQ(eval_spec_to_json(parse(resolved)), resolved);
  const std::string unknown = error_path(json::parse(R"({"zeroshot": {"data": "zs", "tasks": ["piqa", "mmlu"]}})"));
  EXPECT_EQ(unknown.rfind("$.eval.zeroshot.tasks[1] | unknown zero-shot task \"mmlu\"", 0), 0u) << unknown;
  EXPECT_NE(error_path(json::parse(R"({"zeroshot": {"tasks": ["piqa"]}})")).find("$.eval.zeroshot.data"),
            std::string::npos);
  EXPECT_NE(error_path(json::parse(R"({"zeroshot": {"data": "zs", "limit": -1}})")).find("$.eval.zeroshot.limit"),
            std::string::npos);
}

TEST(EvalSpec, RulerDefaultsSkipQaWithoutItsFilesAndRoundTrip) {
  const EvalSpec spec = parse(json::parse(R"({"ruler": {"lengths": [4096, 8192], "samples": 20}})"));
  ASSERT_TRUE(spec.ruler);
  EXPECT_EQ(spec.ruler->tasks.size(), 11u);  // the 13 but qa_1, qa_2
  EXPECT_EQ(spec.ruler->seed, 42u);
  const EvalSpec with_squad = parse(json::parse(R"({"ruler": {"squad": "squad.json", "haystack": "pg.json"}})"));
  EXPECT_EQ(with_squad.ruler->tasks.back(), "qa_1");
  EXPECT_EQ(with_squad.ruler->squad, std::filesystem::path("/base/squad.json"));
  EXPECT_EQ(with_squad.ruler->haystack, "/base/pg.json");
  const json resolved = eval_spec_to_json(with_squad);
  EXPECT_EQ(eval_spec_to_json(parse(resolved)), resolved);
  EXPECT_NE(error_path(json::parse(R"({"ruler": {"tasks": ["qa_2"]}})")).find("qa_2 needs its data file"),
            std::string::npos);
  EXPECT_EQ(error_path(json::parse(R"({"ruler": {"tasks": ["vt", "needle"]}})")).rfind("$.eval.ruler.tasks[1] | ", 0),
            0u);
  EXPECT_NE(error_path(json::parse(R"({"ruler": {"lengths": [100]}})")).find("$.eval.ruler.lengths"),
            std::string::npos);
}

TEST(EvalSpec, HeldoutSlidingWindowsAndPositionBucketsRoundTrip) {
  const EvalSpec spec =
      parse(json::parse(R"({"heldout": {"data": "held.jsonl", "max_length": 64, "stride": 16, "bucket_tokens": 8}})"));
  EXPECT_EQ(spec.heldout->stride, 16);
  EXPECT_EQ(spec.heldout->bucket_tokens, 8);
  const json resolved = eval_spec_to_json(spec);
  EXPECT_EQ(resolved["heldout"]["stride"], 16);
  EXPECT_EQ(eval_spec_to_json(parse(resolved)), resolved);
  EXPECT_EQ(parse(json::parse(R"({"heldout": {"data": "h"}})")).heldout->stride, 0) << "disjoint by default";
}

}  // namespace
}  // namespace sb
