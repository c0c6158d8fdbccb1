// ChatML rendering and SFT samples: ids and the index where the response begins.

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "models/tokenizer/chat_template.h"
#include "tests/tokenizer/tiny_tokenizer_json.h"

namespace sb {
namespace {

using nlohmann::json;
using test::added_token_json;
using test::byte_ids;
using Ids = std::vector<int64_t>;

constexpr int64_t kImStart = 300;
constexpr int64_t kImEnd = 301;

Tokenizer chatml_tokenizer() {
  test::TinyTokenizerOptions options;
  options.added_tokens = json::array({added_token_json(kImStart, "<|im_start|>", true),
                                      added_token_json(kImEnd, "<|im_end|>", true)});
  return Tokenizer::from_json(test::tiny_tokenizer_json(options), "tiny.json");
}

Ids concat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const Ids& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(ChatTemplate, RendersChatMl) {
  EXPECT_EQ(render_chatml({{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}}),
            "<|im_start|>system\nBe brief.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n");
  EXPECT_EQ(render_chatml({}), "");
}

TEST(ChatTemplate, SftIdsAndResponseStart) {
  const Tokenizer t = chatml_tokenizer();
  const SftTokens tokens = encode_sft_chatml(t, SftSample{std::nullopt, "2+2?", "4"});
  const Ids prompt = concat({{kImStart},
                             byte_ids("user\n2+2?"),
                             {kImEnd},
                             byte_ids("\n"),
                             {kImStart},
                             byte_ids("assistant\n")});
  EXPECT_EQ(tokens.ids, concat({prompt, byte_ids("4"), {kImEnd}}));
  EXPECT_EQ(tokens.response_start, prompt.size());
}

TEST(ChatTemplate, SystemPromptOnlyWhenGiven) {
  const Tokenizer t = chatml_tokenizer();
  const SftTokens tokens = encode_sft_chatml(t, SftSample{"sys", "q", "a"});
  const Ids prompt = concat({{kImStart},
                             byte_ids("system\nsys"),
                             {kImEnd},
                             byte_ids("\n"),
                             {kImStart},
                             byte_ids("user\nq"),
                             {kImEnd},
                             byte_ids("\n"),
                             {kImStart},
                             byte_ids("assistant\n")});
  EXPECT_EQ(tokens.ids, concat({prompt, byte_ids("a"), {kImEnd}}));
  EXPECT_EQ(tokens.response_start, prompt.size());
}

TEST(ChatTemplate, PromptAndResponseAreEncodedApart) {
  // Joined, "assistant\n" + "\nx" would give the pre-token "\n\n"; apart, the prompt
  // keeps its own "\n" and the response starts with its own.
  const Tokenizer t = chatml_tokenizer();
  const SftTokens tokens = encode_sft_chatml(t, SftSample{std::nullopt, "q", "\nx"});
  EXPECT_EQ(tokens.ids[tokens.response_start - 1], '\n');
  EXPECT_EQ(
      Ids(tokens.ids.begin() + static_cast<ptrdiff_t>(tokens.response_start), tokens.ids.end()),
      concat({byte_ids("\nx"), {kImEnd}}));
  EXPECT_EQ(t.decode(tokens.ids),
            "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n\nx<|im_end|>");
}

TEST(ChatTemplate, NeedsTheChatMlMarkersAsAddedTokens) {
  const Tokenizer plain = Tokenizer::from_json(test::tiny_tokenizer_json({}), "plain.json");
  EXPECT_THROW(encode_sft_chatml(plain, SftSample{std::nullopt, "q", "a"}), std::invalid_argument);
}

}  // namespace
}  // namespace sb
