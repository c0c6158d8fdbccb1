// BPE merges by rank on tiny tokenizer.json files written by the test, and the loader's
// refusals (each names the JSON path).

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/errors.h"
#include "models/tokenizer/tokenizer.h"
#include "tests/support/run_command.h"
#include "tests/tokenizer/tiny_tokenizer_json.h"

namespace sb {
namespace {

using nlohmann::json;
using test::byte_ids;
using test::tiny_tokenizer_json;
using test::TinyTokenizerOptions;
using Ids = std::vector<int64_t>;

Tokenizer tiny(const TinyTokenizerOptions& options) {
  return Tokenizer::from_json(tiny_tokenizer_json(options), "tiny.json");
}

// The ConfigError a broken file raises; fails the test when none is thrown.
ConfigError load_error(const json& root) {
  try {
    Tokenizer::from_json(root, "broken.json");
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "loading did not fail";
  return ConfigError("", "", "");
}

TEST(BpeMerges, WithoutMergesEveryByteIsAToken) {
  const Tokenizer t = tiny({});
  EXPECT_EQ(t.encode("ab"), byte_ids("ab"));
  EXPECT_EQ(t.encode("a b"), byte_ids("a b"));
  EXPECT_EQ(t.encode("\xC3\xA9"), byte_ids("\xC3\xA9"));  // é: two bytes, two tokens
  EXPECT_EQ(t.vocab_size(), 256);
}

TEST(BpeMerges, LowestRankFirst) {
  // ab (rank 0) before bc: "abc" -> ab + c -> abc.
  TinyTokenizerOptions options;
  options.merges = {{"a", "b"}, {"b", "c"}, {"ab", "c"}};
  EXPECT_EQ(tiny(options).encode("abc"), (Ids{258}));
  EXPECT_EQ(tiny(options).encode("bcab"), (Ids{257, 256}));
  // bc (rank 0) before ab: "abc" -> a + bc -> abc, through the other path.
  options.merges = {{"b", "c"}, {"a", "b"}, {"a", "bc"}};
  EXPECT_EQ(tiny(options).encode("abc"), (Ids{258}));
  // Without the last merge each order leaves its own pair.
  options.merges = {{"b", "c"}, {"a", "b"}};
  EXPECT_EQ(tiny(options).encode("abc"), (Ids{'a', 256}));
  options.merges = {{"a", "b"}, {"b", "c"}};
  EXPECT_EQ(tiny(options).encode("abc"), (Ids{256, 'c'}));
}

TEST(BpeMerges, LeftmostPairWinsTiesAndMergedTokensMergeOn) {
  TinyTokenizerOptions options;
  options.merges = {{"a", "a"}};
  EXPECT_EQ(tiny(options).encode("aaa"), (Ids{256, 'a'}));
  EXPECT_EQ(tiny(options).encode("aaaa"), (Ids{256, 256}));
  options.merges = {{"a", "a"}, {"aa", "aa"}};
  EXPECT_EQ(tiny(options).encode("aaaaa"), (Ids{257, 'a'}));
}

TEST(BpeMerges, MergesOnlyWithinAPreToken) {
  TinyTokenizerOptions options;
  options.merges = {{"a", " "}, {" ", "b"}};
  // Pieces "a", " b": the pair "a " never forms.
  EXPECT_EQ(tiny(options).encode("a b"), (Ids{'a', 257}));
}

TEST(BpeMerges, StringAndPairMergesAreTheSame) {
  TinyTokenizerOptions options;
  options.merges = {{" ", "t"}, {"h", "e"}, {" t", "he"}, {"1", "2"}};
  const std::string text = "the the 12 \n\n theme";
  options.merges_as_pairs = true;
  const Ids from_pairs = tiny(options).encode(text);
  options.merges_as_pairs = false;
  EXPECT_EQ(tiny(options).encode(text), from_pairs);
  EXPECT_EQ(from_pairs, (Ids{'t', 257, 258, ' ', '1', '2', ' ', '\n', '\n', 258, 'm', 'e'}));
}

TEST(BpeMerges, IgnoreMergesTakesWholeVocabularyPieces) {
  TinyTokenizerOptions options;
  options.extra_tokens = {"xyz"};  // id 256, reachable by no merge
  EXPECT_EQ(tiny(options).encode("xyz"), byte_ids("xyz"));
  options.ignore_merges = true;
  EXPECT_EQ(tiny(options).encode("xyz"), (Ids{256}));
  EXPECT_EQ(tiny(options).encode("xyzw"), byte_ids("xyzw"));
}

TEST(BpeMerges, NfcComposesBeforeSplittingAndMerging) {
  TinyTokenizerOptions options;
  options.merges = {{"\xC3", "\xA9"}};  // the two bytes of é (U+00E9)
  const Ids composed = tiny(options).encode("caf\xC3\xA9");
  EXPECT_EQ(composed, (Ids{'c', 'a', 'f', 256}));
  EXPECT_EQ(tiny(options).encode("cafe\xCC\x81"), composed);  // e + U+0301
  options.nfc = false;
  EXPECT_EQ(tiny(options).encode("cafe\xCC\x81"), byte_ids("cafe\xCC\x81"));
}

TEST(BpeMerges, RejectsInvalidUtf8Input) {
  EXPECT_THROW(tiny({}).encode("ab\xFF"), std::invalid_argument);
}

TEST(TokenizerFile, LoadsFromDisk) {
  const auto dir = test::fresh_temp_dir("tokenizer_load");
  const auto path = dir / "tokenizer.json";
  {
    TinyTokenizerOptions options;
    options.merges = {{"h", "i"}};
    std::ofstream(path) << tiny_tokenizer_json(options).dump();
  }
  const Tokenizer t = Tokenizer::from_file(path);
  EXPECT_EQ(t.encode("hi"), (Ids{256}));
  EXPECT_EQ(t.source(), path.string());
  std::ofstream(dir / "broken.json") << "{\"model\": ";
  EXPECT_THROW(Tokenizer::from_file(dir / "broken.json"), ConfigError);
  std::filesystem::remove_all(dir);
  EXPECT_THROW(Tokenizer::from_file(path), ConfigError);
}

TEST(TokenizerFile, ErrorsNameTheJsonPath) {
  json root = tiny_tokenizer_json({});
  root["model"]["type"] = "WordPiece";
  EXPECT_EQ(load_error(root).json_path(), "$.model.type");

  root = tiny_tokenizer_json({});
  root["model"]["vocab"].erase("\xC4\xA0");  // "Ġ", the space byte
  const ConfigError missing_byte = load_error(root);
  EXPECT_EQ(missing_byte.json_path(), "$.model.vocab");
  EXPECT_NE(std::string(missing_byte.what()).find("0x20"), std::string::npos)
      << missing_byte.what();

  root = tiny_tokenizer_json({});
  root["model"]["merges"] = json::array({json::array({"a", "b"}), json::array({"a", "q!"})});
  root["model"]["vocab"]["ab"] = 256;
  EXPECT_EQ(load_error(root).json_path(), "$.model.merges[1]");

  root = tiny_tokenizer_json({});
  root["model"]["merges"] = json::array({"a b"});  // "ab" is not in the vocabulary
  EXPECT_EQ(load_error(root).json_path(), "$.model.merges[0]");

  root = tiny_tokenizer_json({});
  root["model"]["merges"] = json::array({"a  b"});
  EXPECT_EQ(load_error(root).json_path(), "$.model.merges[0]");

  root = tiny_tokenizer_json({});
  root["model"]["dropout"] = 0.1;
  EXPECT_EQ(load_error(root).json_path(), "$.model.dropout");

  root = tiny_tokenizer_json({});
  root["model"]["extra"] = 1;
  EXPECT_EQ(load_error(root).json_path(), "$.model.extra");

  root = tiny_tokenizer_json({});
  root["normalizer"] = json{{"type", "Lowercase"}};
  EXPECT_EQ(load_error(root).json_path(), "$.normalizer.type");

  root = tiny_tokenizer_json({});
  root["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
  EXPECT_EQ(load_error(root).json_path(), "$.pre_tokenizer.pretokenizers[0].behavior");

  root = tiny_tokenizer_json({});
  root["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+";
  EXPECT_EQ(load_error(root).json_path(), "$.pre_tokenizer.pretokenizers[0].pattern");

  root = tiny_tokenizer_json({});
  root["pre_tokenizer"] = root["pre_tokenizer"]["pretokenizers"][0];
  EXPECT_EQ(load_error(root).json_path(), "$.pre_tokenizer");  // no ByteLevel

  root = tiny_tokenizer_json({});
  root["decoder"] = nullptr;
  EXPECT_EQ(load_error(root).json_path(), "$.decoder");

  // A template that adds a BOS id is refused; transformers' identity template is read.
  const json seq_a = json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
  const json seq_b = json{{"Sequence", {{"id", "B"}, {"type_id", 1}}}};
  root = tiny_tokenizer_json({});
  root["post_processor"] = json{{"type", "TemplateProcessing"},
                                {"single", json::array({json{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, seq_a})},
                                {"pair", json::array({seq_a, seq_b})},
                                {"special_tokens", json::object()}};
  EXPECT_EQ(load_error(root).json_path(), "$.post_processor");
  root = tiny_tokenizer_json({});
  root["post_processor"] = json{{"type", "RobertaProcessing"}};
  EXPECT_EQ(load_error(root).json_path(), "$.post_processor.type");
  root = tiny_tokenizer_json({});
  const json identity{{"type", "TemplateProcessing"},
                      {"single", json::array({seq_a})},
                      {"pair", json::array({seq_a, seq_b})},
                      {"special_tokens", json::object()}};
  root["post_processor"] = json{{"type", "Sequence"},
                                {"processors", json::array({root["post_processor"], identity})}};
  EXPECT_EQ(Tokenizer::from_json(root, "<test>").encode("ab"), Tokenizer::from_json(tiny_tokenizer_json({}), "<test>").encode("ab"));

  root = tiny_tokenizer_json({});
  root["truncation"] = json{{"max_length", 8}};
  EXPECT_EQ(load_error(root).json_path(), "$.truncation");

  root = tiny_tokenizer_json({});
  root["added_tokens"] = json::array({test::added_token_json(97, "<x>", true)});  // 97 is "a"
  EXPECT_EQ(load_error(root).json_path(), "$.added_tokens[0].id");

  json not_an_object = json::array();
  EXPECT_EQ(load_error(not_an_object).json_path(), "$");
}

}  // namespace
}  // namespace sb
