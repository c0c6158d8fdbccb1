// GPT-2's byte <-> Unicode table and UTF-8 handling: the facts the vocabulary files and
// Python's errors="replace" fix.

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "models/tokenizer/byte_level.h"
#include "models/tokenizer/utf8.h"

namespace sb {
namespace {

TEST(ByteLevel, TableIsABijectionOfAll256Bytes) {
  const auto& cps = byte_level_code_points();
  std::set<char32_t> seen(cps.begin(), cps.end());
  EXPECT_EQ(seen.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(byte_level_byte(cps[b]), b) << "byte " << b;
}

TEST(ByteLevel, PrintableBytesMapToThemselvesOthersToU0100Onwards) {
  const auto& cps = byte_level_code_points();
  for (int b = 0x21; b <= 0x7E; ++b) EXPECT_EQ(cps[b], static_cast<char32_t>(b));
  for (int b = 0xA1; b <= 0xAC; ++b) EXPECT_EQ(cps[b], static_cast<char32_t>(b));
  for (int b = 0xAE; b <= 0xFF; ++b) EXPECT_EQ(cps[b], static_cast<char32_t>(b));
  // The 68 others in byte order: 0x00-0x20, 0x7F-0xA0, 0xAD.
  EXPECT_EQ(cps[0x00], U'\u0100');
  EXPECT_EQ(cps[0x0A], U'\u010A');  // 'Ċ', newline
  EXPECT_EQ(cps[0x20], U'\u0120');  // 'Ġ', space
  EXPECT_EQ(cps[0x7F], U'\u0121');
  EXPECT_EQ(cps[0xA0], U'\u0142');
  EXPECT_EQ(cps[0xAD], U'\u0143');
  EXPECT_EQ(byte_level_byte(U'\u0144'), -1);
  EXPECT_EQ(byte_level_byte(U' '), -1);  // a real space is not in the alphabet
}

TEST(ByteLevel, EncodeSpellsBytesAndDecodeInverts) {
  EXPECT_EQ(byte_level_encode(" hello\n"), "\xC4\xA0hello\xC4\x8A");  // "Ġhello Ċ"
  EXPECT_EQ(byte_level_encode("\xC3\xA9"), "\xC3\x83\xC2\xA9");       // é -> "Ã©"
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(byte_level_decode(byte_level_encode(all)), all);
  EXPECT_EQ(byte_level_decode("a b"), std::nullopt);  // real space: not a byte-level token
  EXPECT_EQ(byte_level_decode("<|im_end|>"), "<|im_end|>");
}

TEST(Utf8, FindsTheFirstIllFormedByte) {
  EXPECT_EQ(utf8::find_invalid("plain ascii"), std::string_view::npos);
  EXPECT_EQ(utf8::find_invalid("h\xC3\xA9 \xE4\xBD\xA0 \xF0\x9F\x91\x8B"), std::string_view::npos);
  EXPECT_EQ(utf8::find_invalid("ab\xFF"), 2u);
  EXPECT_EQ(utf8::find_invalid("a\xC0\xAF"), 1u);         // overlong '/'
  EXPECT_EQ(utf8::find_invalid("\xED\xA0\x80"), 0u);      // surrogate U+D800
  EXPECT_EQ(utf8::find_invalid("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(utf8::find_invalid("x\xE4\xBD"), 1u);         // truncated
}

// Expected strings are Python's bytes.decode("utf-8", errors="replace").
TEST(Utf8, LossyDecodingReplacesMaximalSubparts) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8::decode_lossy("\xFF"), r);
  EXPECT_EQ(utf8::decode_lossy("\xFF\xFE"), r + r);
  EXPECT_EQ(utf8::decode_lossy("\xE2\x82"), r);  // truncated euro sign: one
  EXPECT_EQ(utf8::decode_lossy("\xE2\x82@"), r + "@");
  EXPECT_EQ(utf8::decode_lossy("\xE2\x82\xAC"), "\xE2\x82\xAC");
  EXPECT_EQ(utf8::decode_lossy("\xF0\x80\x80"), r + r + r);  // F0 80: 80 cannot follow F0
  EXPECT_EQ(utf8::decode_lossy("\xED\xA0\x80"), r + r + r);  // surrogate
  EXPECT_EQ(utf8::decode_lossy("\xC0\xAF"), r + r);
  EXPECT_EQ(utf8::decode_lossy("\xF4\x90\x80\x80"), r + r + r + r);
  EXPECT_EQ(utf8::decode_lossy("\xF0\x9F\x98"), r);  // truncated emoji: one
  EXPECT_EQ(utf8::decode_lossy("a\xF0\x9F\x98\x80!"), "a\xF0\x9F\x98\x80!");  // 😀 kept
  EXPECT_EQ(utf8::decode_lossy("\x80\x80"), r + r);
}

}  // namespace
}  // namespace sb
