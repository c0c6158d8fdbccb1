// Prompt templates, the chat style, v2 answer parsing and scoring, and resumable
// prediction files. Truncation and tokenization are checked against transformers in
// tests/python/test_longbench_predict.py.
#include <gtest/gtest.h>

#include <fstream>

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/eval/longbench/longbench_prompt.h"
#include "harness/eval/longbench/longbench_v2.h"
#include "harness/eval/resumable_jsonl.h"
#include "tests/support/run_command.h"

namespace sb {
namespace {

using nlohmann::ordered_json;

TEST(LongBenchPrompt, PythonFormatFillsFieldsOnce) {
  const ordered_json item = {{"context", "a {input} b"}, {"input", "Q"}, {"length", 12}};
  EXPECT_EQ(python_format_fields("{{x}} {context}|{input}|{length}", item, "t"), "{x} a {input} b|Q|12");
  EXPECT_THROW(python_format_fields("{missing}", item, "t"), ConfigError);
  EXPECT_THROW(python_format_fields("a } b", item, "t"), ConfigError);
  EXPECT_THROW(python_format_fields("{context:>5}", item, "t"), ConfigError);
}

TEST(LongBenchPrompt, ChatStyleIsChatMlWithQwensDefaultSystemPrompt) {
  ChatStyle style;
  EXPECT_EQ(apply_chat_style("hi", style),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  style.system_prompt.reset();
  EXPECT_EQ(apply_chat_style("hi", style), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  style.chat = false;
  EXPECT_EQ(apply_chat_style("hi", style), "hi");
}

TEST(LongBenchPrompt, V2TemplateReplacesInOrderAndStrips) {
  const ordered_json item = {{"context", " doc $Q$ \n"}, {"question", " why? "}, {"choice_A", "a"},
                             {"choice_B", "b"},          {"choice_C", "c"},      {"choice_D", "d"}};
  // $DOC$ goes in first, so a "$Q$" inside the document is replaced too (str.replace).
  EXPECT_EQ(longbench_v2_prompt("[$DOC$] $Q$ $C_A$$C_B$$C_C$$C_D$", item, "t"), "[doc why?] why? abcd");
}

TEST(LongBenchV2, AnswerParsing) {
  EXPECT_EQ(longbench_v2_extract_answer("The correct answer is (B)."), "B");
  EXPECT_EQ(longbench_v2_extract_answer("**The correct answer is C**"), "C");
  EXPECT_EQ(longbench_v2_extract_answer("The correct answer is (E), The correct answer is D"), "D");
  EXPECT_EQ(longbench_v2_extract_answer("the correct answer is (A)"), std::nullopt);
}

TEST(LongBenchV2, AccuracyGroups) {
  std::vector<ordered_json> records = {
      {{"judge", true}, {"difficulty", "easy"}, {"length", "short"}},
      {{"judge", false}, {"difficulty", "hard"}, {"length", "short"}},
      {{"judge", true}, {"difficulty", "hard"}, {"length", "long"}},
  };
  const ordered_json r = score_longbench_v2_records(records, "t");
  EXPECT_EQ(r["overall"].get<double>(), 66.7);
  EXPECT_EQ(r["easy"].get<double>(), 100.0);
  EXPECT_EQ(r["hard"].get<double>(), 50.0);
  EXPECT_EQ(r["short"].get<double>(), 50.0);
  EXPECT_TRUE(r["medium"].is_null());
  EXPECT_EQ(r["counts"]["long"].get<int64_t>(), 1);
  records.push_back({{"difficulty", "easy"}, {"length", "short"}});
  EXPECT_THROW(score_longbench_v2_records(records, "t"), ConfigError);
}

TEST(ResumableJsonl, KeepsCompleteLinesAndCutsAnUnfinishedOne) {
  const auto dir = test::fresh_temp_dir("resumable_jsonl");
  const auto path = dir / "task.jsonl";
  {
    ResumableJsonl file(path);
    EXPECT_TRUE(file.existing().empty());
    file.append({{"pred", "é"}, {"answers", {"x"}}});
    file.append({{"pred", "b"}, {"length", 3}});
  }
  EXPECT_EQ(read_file(path), "{\"pred\": \"é\", \"answers\": [\"x\"]}\n{\"pred\": \"b\", \"length\": 3}\n");
  std::ofstream(path, std::ios::app) << "{\"pred\": \"c";  // a run killed mid-write
  {
    ResumableJsonl file(path);
    ASSERT_EQ(file.existing().size(), 2u);
    EXPECT_EQ(file.existing()[1]["pred"], "b");
    EXPECT_EQ(file.cut_bytes(), 11u);
    file.append({{"pred", "c"}});
  }
  EXPECT_EQ(read_file(path), "{\"pred\": \"é\", \"answers\": [\"x\"]}\n{\"pred\": \"b\", \"length\": 3}\n{\"pred\": \"c\"}\n");
  std::ofstream(path, std::ios::app) << "not json\n";
  EXPECT_THROW(ResumableJsonl{path}, ConfigError);
}

}  // namespace
}  // namespace sb
