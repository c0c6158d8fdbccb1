// lm-eval's zero-shot task rules on cases worked out by hand with Python 3.11 (str
// methods, re.sub) and lm_eval 0.4.13's YAML; the bulk comparison with lm-eval itself
// is tests/python/test_zeroshot_oracle.py.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/errors.h"
#include "harness/common/progress_eta.h"
#include "harness/eval/longbench/python_text.h"
#include "harness/eval/zeroshot/zeroshot_eval.h"
#include "harness/eval/zeroshot/zeroshot_tasks.h"

namespace sb {
namespace {

using nlohmann::ordered_json;

std::string capitalize(const std::string& text) { return u32_to_utf8(python_capitalize(utf8_to_u32(text))); }

ZeroShotDoc make(const std::string& task, const char* row) {
  return zeroshot_task(task, "test").make_doc(ordered_json::parse(row), "rows.jsonl:1");
}

TEST(ZeroShotText, CapitalizeTakesFullTitleCaseThenLowersTheRest) {
  EXPECT_EQ(capitalize("élan CITIES"), "Élan cities");
  EXPECT_EQ(capitalize("ßa"), "Ssa");      // SpecialCasing: title of ß is "Ss"
  EXPECT_EQ(capitalize("ǆemal"), "ǅemal");  // the title-case digraph, not "Ǆ"
  EXPECT_EQ(capitalize("1ABC"), "1abc");
  EXPECT_EQ(capitalize("ΣΑΣ ΟΔΟΣ"), "Σας οδος");  // final sigma in context
  EXPECT_EQ(capitalize("AΣ"), "Aς");              // the context includes the first character
  EXPECT_EQ(capitalize(""), "");
}

TEST(ZeroShotText, HellaSwagPreprocessMatchesUpstreamRegexAndReplaces) {
  EXPECT_EQ(hellaswag_preprocess("  A [title] B [x] c  d   e\n"), "A. B c d  e");
  EXPECT_EQ(hellaswag_preprocess("[a\nb] [c]"), "[a\nb] ");  // "." does not cross a newline
  EXPECT_EQ(hellaswag_preprocess("x [y] [z]w"), "x w");
  EXPECT_EQ(hellaswag_preprocess("open [ended"), "open [ended");
}

TEST(ZeroShotTasks, ArcPutsEachChoiceAfterTheQuestionWithOneSpace) {
  const ZeroShotDoc doc = make("arc_easy", R"({"id": "x", "question": "Why?",
      "choices": {"text": ["a b", "c"], "label": ["1", "2"]}, "answerKey": "2"})");
  ASSERT_EQ(doc.requests.size(), 2u);
  EXPECT_EQ(doc.requests[0].context, "Question: Why?\nAnswer:");
  EXPECT_EQ(doc.requests[0].continuation, " a b");
  EXPECT_EQ(doc.requests[1].continuation, " c");
  EXPECT_EQ(doc.gold, 1);
  EXPECT_EQ(doc.target, 1);
}

TEST(ZeroShotTasks, BoolqPiqaAndOpenBookQaPrompts) {
  const ZeroShotDoc boolq = make("boolq", R"({"question": "is it", "passage": "P.", "idx": 0, "label": 0})");
  EXPECT_EQ(boolq.requests[1].context, "P.\nQuestion: is it?\nAnswer:");
  EXPECT_EQ(boolq.requests[1].continuation, " yes");
  EXPECT_EQ(boolq.gold, 0);
  const ZeroShotDoc piqa = make("piqa", R"({"goal": "g", "sol1": "s1", "sol2": "s2", "label": 1})");
  EXPECT_EQ(piqa.requests[0].context, "Question: g\nAnswer:");
  EXPECT_EQ(piqa.choices, (std::vector<std::string>{"s1", "s2"}));
  const ZeroShotDoc obqa = make("openbookqa", R"({"id": "o", "question_stem": "The sun is",
      "choices": {"text": ["hot", "cold"], "label": ["A", "B"]}, "answerKey": " B"})");
  EXPECT_EQ(obqa.requests[0].context, "The sun is");  // question_stem alone, no "Question:"
  EXPECT_EQ(obqa.gold, 1);                              // answerKey.lstrip()
}

TEST(ZeroShotTasks, WinograndeScoresTheRestOfTheSentenceAfterEachFilledInOption) {
  const ZeroShotDoc doc = make("winogrande", R"({"sentence": "Ann gave Bo _ book  because  ",
      "option1": "her", "option2": "his", "answer": "2"})");
  ASSERT_EQ(doc.requests.size(), 2u);
  EXPECT_EQ(doc.requests[0].context, "Ann gave Bo her");
  EXPECT_EQ(doc.requests[1].context, "Ann gave Bo his");
  EXPECT_EQ(doc.requests[0].continuation, " book  because");  // rest stripped, then " " prefixed
  EXPECT_EQ(doc.gold, 1);
  EXPECT_EQ(doc.target, "book  because");
}

TEST(ZeroShotTasks, HellaSwagBuildsTheQueryFromActivityAndCapitalizedContext) {
  const ZeroShotDoc doc = make("hellaswag", R"({"activity_label": "Baking", "ctx_a": "She mixes [step] flour.",
      "ctx_b": "then SHE", "endings": ["bakes  it.", "[title] runs"], "label": "1"})");
  EXPECT_EQ(doc.requests[0].context, "Baking: She mixes flour. Then she");
  // strip() runs first: removing "[title]" leaves the space after it
  EXPECT_EQ(doc.choices, (std::vector<std::string>{"bakes it.", " runs"}));
  EXPECT_EQ(doc.gold, 1);
}

TEST(ZeroShotTasks, BadRowsNameTheLineAndTheField) {
  const auto message = [](const std::string& task, const char* row) {
    try {
      make(task, row);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("arc_easy", R"({"question": "q", "answerKey": "A"})").find("rows.jsonl:1"), std::string::npos);
  EXPECT_NE(message("arc_easy", R"({"question": "q", "answerKey": "A"})").find("$.choices"), std::string::npos);
  EXPECT_NE(message("arc_easy", R"({"question": "q", "choices": {"text": ["a"], "label": ["B"]}, "answerKey": "A"})")
                .find("$.answerKey"),
            std::string::npos);
  EXPECT_NE(message("hellaswag", R"({"activity_label": "a", "ctx_a": "b", "ctx_b": "c", "endings": ["d"],
      "label": ""})").find("validation split"), std::string::npos);
  EXPECT_NE(message("piqa", R"({"goal": "g", "sol1": "a", "sol2": "b", "label": 2})").find("answer 2 of 2"),
            std::string::npos);
  EXPECT_NE(message("winogrande", R"({"sentence": "no blank", "option1": "a", "option2": "b", "answer": "1"})")
                .find("blank"),
            std::string::npos);
  try {
    zeroshot_task("mmlu", "--tasks");
    FAIL() << "mmlu is not a task here";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("arc_challenge"), std::string::npos);
  }
}

TEST(ZeroShotMetrics, AccNormDividesByCharactersAndTiesGoToTheFirstChoice) {
  // -6 / 3 characters = -2 < -5 / 3 = -1.67: "abc" wins; by bytes (-6 / 6 = -1) it would be "ééé".
  EXPECT_EQ(zeroshot_choice_normalized({-6.0, -5.0}, {"ééé", "abc"}), 1u);
  EXPECT_EQ(zeroshot_choice({-6.0, -5.0}), 1u);
  EXPECT_EQ(zeroshot_choice({-2.0, -1.0, -1.0}), 1u);  // np.argmax keeps the first maximum
  EXPECT_EQ(zeroshot_choice_normalized({-4.0, -2.0}, {"abcd", "ab"}), 0u);  // -1 == -1: the first
}

TEST(ProgressEta, FormatsDurationsAndCountsResumedItemsTowardTheFraction) {
  EXPECT_EQ(format_duration(45), "45s");
  EXPECT_EQ(format_duration(725), "12m05s");
  EXPECT_EQ(format_duration(10920), "3h02m");
  const ProgressEta eta(200, 100);
  EXPECT_EQ(eta.line(100).rfind("100/200 (50.0 %)", 0), 0u);
  EXPECT_TRUE(eta.due(105));   // every 5 items of the 100 left
  EXPECT_FALSE(eta.due(103));
  EXPECT_TRUE(eta.due(200));
}

}  // namespace
}  // namespace sb
