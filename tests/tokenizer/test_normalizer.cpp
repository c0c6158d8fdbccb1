// NFC as HF tokenizers computes it: standard NFC for characters of Unicode 9.0 and
// earlier, later characters left alone (see models/tokenizer/normalizer.h).

#include <gtest/gtest.h>

#include "models/tokenizer/normalizer.h"

namespace sb {
namespace {

TEST(Nfc, ComposesAndReordersLikeTheStandard) {
  EXPECT_EQ(nfc_normalize("plain ascii"), "plain ascii");
  EXPECT_EQ(nfc_normalize("cafe\u0301"), "caf\u00E9");
  EXPECT_EQ(nfc_normalize("\u1100\u1161\u11A8"), "\uAC01");          // Hangul jamo -> 각
  EXPECT_EQ(nfc_normalize("q\u0301\u0323"), "q\u0323\u0301");        // class 220 before 230
  EXPECT_EQ(nfc_normalize("\u212B"), "\u00C5");                      // Angstrom sign -> Å
  EXPECT_EQ(nfc_normalize("\u0301\U0001E94A"), "\U0001E94A\u0301");  // Adlam nukta (9.0)
}

TEST(Nfc, LeavesCharactersAfterUnicode9Alone) {
  // U+1DF9 (10.0, class 220) would go before U+0301 (230) in today's NFC.
  EXPECT_EQ(nfc_normalize("\u0301\u1DF9"), "\u0301\u1DF9");
  // ... and blocks the reordering of the marks around it, which still happens apart.
  EXPECT_EQ(nfc_normalize("q\u0301\u0323\u1DF9\u0301\u0323"), "q\u0323\u0301\u1DF9\u0323\u0301");
  // Dives Akuru O (13.0) = U+11935 U+11930; HF does not compose it.
  EXPECT_EQ(nfc_normalize("\U00011935\U00011930"), "\U00011935\U00011930");
  EXPECT_EQ(nfc_normalize("e\u0301\U00011935\U00011930e\u0301"),
            "\u00E9\U00011935\U00011930\u00E9");
}

}  // namespace
}  // namespace sb
