// The C++ jieba on sentences whose segmentation jieba 0.42.1 itself gives (values taken
// from jieba.cut(text)); the large comparison is tests/python/test_longbench_jieba.py.
// jieba's files come from the project's Python environment: without it these tests exit
// 77 (SKIPPED), never pass.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <memory>

#include "common/errors.h"
#include "harness/eval/longbench/jieba_segmenter.h"

namespace sb {
namespace {

const JiebaSegmenter& jieba() {
  static std::unique_ptr<JiebaSegmenter> segmenter;
  if (!segmenter) {
    try {
      segmenter = std::make_unique<JiebaSegmenter>(JiebaSegmenter::load(locate_jieba_dir("", "SB_JIEBA_DIR")));
    } catch (const ConfigError& e) {
      std::cerr << "SKIPPED: " << e.what() << "\n";
      std::exit(77);
    }
  }
  return *segmenter;
}

using Words = std::vector<std::string>;

TEST(Jieba, DictionaryRoute) {
  EXPECT_EQ(jieba().cut_utf8("我来到北京清华大学"), (Words{"我", "来到", "北京", "清华大学"}));
  EXPECT_EQ(jieba().cut_utf8("结婚的和尚未结婚的"), (Words{"结婚", "的", "和", "尚未", "结婚", "的"}));
  EXPECT_EQ(jieba().cut_utf8("小明硕士毕业于中国科学院计算所，后在日本京都大学深造"),
            (Words{"小明", "硕士", "毕业", "于", "中国科学院", "计算所", "，", "后", "在", "日本京都大学", "深造"}));
}

TEST(Jieba, HmmFindsUnknownWords) {
  // "杭研" is not in the dictionary: the HMM joins it.
  EXPECT_EQ(jieba().cut_utf8("他来到了网易杭研大厦"), (Words{"他", "来到", "了", "网易", "杭研", "大厦"}));
}

TEST(Jieba, RunCharactersWhitespaceAndOtherCharacters) {
  EXPECT_EQ(jieba().cut_utf8("C++和3.5%的a_b\r\n好"),
            (Words{"C++", "和", "3.5%", "的", "a", "_", "b", "\r\n", "好"}));
  EXPECT_EQ(jieba().cut_utf8(""), Words{});
  EXPECT_EQ(jieba().cut_utf8("《》"), (Words{"《", "》"}));
}

TEST(Jieba, ReportsWhereItsFilesCameFrom) {
  EXPECT_TRUE(std::filesystem::exists(jieba().dir() / "dict.txt"));
  EXPECT_EQ(jieba().version(), "0.42.1");
}

TEST(Jieba, MissingFolderIsAConfigErrorNamingTheFlag) {
  try {
    locate_jieba_dir("/nonexistent", "--jieba-dir");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), "--jieba-dir");
    EXPECT_NE(e.fix().find("jieba==0.42.1"), std::string::npos);
  }
}

}  // namespace
}  // namespace sb
