// Added and special tokens: cut out of the raw text before anything else, longest
// leftmost first, with HF's lstrip / rstrip / single_word / normalized options.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "models/tokenizer/tokenizer.h"
#include "tests/tokenizer/tiny_tokenizer_json.h"

namespace sb {
namespace {

using nlohmann::json;
using test::added_token_json;
using test::byte_ids;
using test::tiny_tokenizer_json;
using test::TinyTokenizerOptions;
using Ids = std::vector<int64_t>;

Ids concat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const Ids& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

Tokenizer with_added(json added) {
  TinyTokenizerOptions options;
  options.added_tokens = std::move(added);
  return Tokenizer::from_json(tiny_tokenizer_json(options), "tiny.json");
}

TEST(AddedTokens, SpecialTokensAreCutOutFirst) {
  const Tokenizer t = with_added(json::array({added_token_json(300, "<|endoftext|>", true),
                                              added_token_json(301, "<|im_start|>", true),
                                              added_token_json(302, "<|im_end|>", true)}));
  EXPECT_EQ(t.encode("hi<|im_end|>there"), concat({byte_ids("hi"), {302}, byte_ids("there")}));
  EXPECT_EQ(t.encode("<|im_start|>user\n"), concat({{301}, byte_ids("user\n")}));
  // Without the marker the same characters are ordinary text.
  EXPECT_EQ(t.encode("<|im_end"), byte_ids("<|im_end"));
  EXPECT_EQ(t.encode("<|endoftext|><|endoftext|>"), (Ids{300, 300}));
  EXPECT_EQ(t.token_to_id("<|im_end|>"), 302);
  EXPECT_EQ(t.vocab_size(), 303);
  EXPECT_TRUE(t.is_special_token(302));
  EXPECT_FALSE(t.is_special_token('a'));
}

TEST(AddedTokens, LongestMatchAtTheLeftmostPosition) {
  const Tokenizer t = with_added(
      json::array({added_token_json(300, "<a>", false), added_token_json(301, "<a>b", false),
                   added_token_json(302, "b<a", false)}));
  EXPECT_EQ(t.encode("x<a>by"), concat({byte_ids("x"), {301}, byte_ids("y")}));
  EXPECT_EQ(t.encode("x<a>y"), concat({byte_ids("x"), {300}, byte_ids("y")}));
  // "b<a" starts further left than "<a>b" and wins; the rest is text.
  EXPECT_EQ(t.encode("b<a>b"), concat({{302}, byte_ids(">b")}));
}

TEST(AddedTokens, LstripAndRstripSwallowWhiteSpace) {
  const Tokenizer t = with_added(json::array(
      {added_token_json(300, "<mask>", true, false, /*lstrip=*/true, /*rstrip=*/true)}));
  EXPECT_EQ(t.encode("a  <mask>\t b"), concat({byte_ids("a"), {300}, byte_ids("b")}));
  const Tokenizer left_only =
      with_added(json::array({added_token_json(300, "<mask>", true, false, true, false)}));
  EXPECT_EQ(left_only.encode("a <mask> b"), concat({byte_ids("a"), {300}, byte_ids(" b")}));
}

TEST(AddedTokens, SingleWordNeedsNonWordNeighbours) {
  const Tokenizer t = with_added(json::array(
      {added_token_json(300, "tok", false, false, false, false, /*single_word=*/true)}));
  EXPECT_EQ(t.encode("a tok."), concat({byte_ids("a "), {300}, byte_ids(".")}));
  EXPECT_EQ(t.encode("atok"), byte_ids("atok"));
  EXPECT_EQ(t.encode("tok9"), byte_ids("tok9"));
}

TEST(AddedTokens, NormalizedTokensMatchTheNfcText) {
  // Content written decomposed (e + U+0301); matched wherever the NFC text has é.
  const Tokenizer t = with_added(
      json::array({added_token_json(300, "e\xCC\x81t\xC3\xA9", false, /*normalized=*/true)}));
  EXPECT_EQ(t.encode("\xC3\xA9t\xC3\xA9!"), concat({{300}, byte_ids("!")}));
  EXPECT_EQ(t.encode("e\xCC\x81te\xCC\x81!"), concat({{300}, byte_ids("!")}));
  // A normalized=false token is matched in the raw text only, as written.
  const Tokenizer raw =
      with_added(json::array({added_token_json(300, "e\xCC\x81", false, /*normalized=*/false)}));
  EXPECT_EQ(raw.encode("e\xCC\x81"), (Ids{300}));
  EXPECT_EQ(raw.encode("\xC3\xA9"), byte_ids("\xC3\xA9"));
}

TEST(Decode, MapsBackThroughTheByteTable) {
  TinyTokenizerOptions options;
  options.merges = {{" ", "w"}};
  options.added_tokens = json::array(
      {added_token_json(300, "<|im_end|>", true), added_token_json(301, "<x y>", false)});
  const Tokenizer t = Tokenizer::from_json(tiny_tokenizer_json(options), "tiny.json");
  const std::string text = "Hi world\n\t\xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x91\x8B<|im_end|><x y>";
  EXPECT_EQ(t.decode(t.encode(text)), text);
  EXPECT_EQ(t.decode(t.encode(text), /*skip_special=*/true),
            "Hi world\n\t\xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x91\x8B<x y>");
  EXPECT_EQ(t.id_to_token(256), "\xC4\xA0w");  // "Ġw"
  EXPECT_EQ(t.id_to_token(301), "<x y>");
  EXPECT_EQ(t.id_to_token(299), std::nullopt);
}

TEST(Decode, InvalidUtf8BecomesReplacementCharacters) {
  const Tokenizer t = with_added(json::array());
  EXPECT_EQ(t.decode({0xFF}), "\xEF\xBF\xBD");
  EXPECT_EQ(t.decode({0xE2, 0x82}), "\xEF\xBF\xBD");  // one per maximal subpart
  EXPECT_EQ(t.decode({0xE2, 0x82, 'A'}), std::string("\xEF\xBF\xBD") + 'A');
  EXPECT_EQ(t.decode({0xE2, 0x82, 0xAC}), "\xE2\x82\xAC");
  EXPECT_EQ(t.decode({}), "");
  EXPECT_THROW(t.decode({256}), std::out_of_range);
  EXPECT_THROW(t.decode({-1}), std::out_of_range);
}

}  // namespace
}  // namespace sb
