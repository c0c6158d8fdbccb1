// Data beyond the arithmetic task: length profiles shaped like the paper's data sets,
// lengths from a file, the retrieval task's layout, multi-turn ChatML targets and the
// JSONL SFT loader (errors naming file:line, too-long rules, per-epoch shuffling).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "common/errors.h"
#include "harness/data/deterministic_rng.h"
#include "harness/data/jsonl_sft_dataset.h"
#include "harness/data/packed_microbatch.h"
#include "harness/data/retrieval_task.h"
#include "harness/data/synthetic_dataset.h"
#include "models/tokenizer/chat_template.h"
#include "models/tokenizer/tokenizer.h"
#include "tests/support/batch_shape_check.h"
#include "tests/tokenizer/tiny_tokenizer_json.h"

namespace sb {
namespace {

namespace fs = std::filesystem;

fs::path temp_file(const std::string& name, const std::string& content) {
  const fs::path dir = fs::temp_directory_path() / ("sb_data_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / name) << content;
  return dir / name;
}

TEST(LengthProfiles, BimodalHasMostMassUnder4KAndAbove16K) {
  SyntheticDataSection s;
  s.vocab_size = 64;
  s.lengths = LengthSource::kProfile;
  s.length_profile = "bimodal";
  SyntheticDataset d(s, 1);
  int under_4k = 0, over_16k = 0;
  const int n = 4000;
  for (int64_t id = 0; id < n; ++id) {
    const int64_t length = d.sample(id).length();
    ASSERT_GE(length, 256);
    ASSERT_LE(length, 32768);
    under_4k += length <= 4096;
    over_16k += length >= 16384;
  }
  EXPECT_NEAR(under_4k / static_cast<double>(n), 0.55, 0.03);
  EXPECT_NEAR(over_16k / static_cast<double>(n), 0.35, 0.03);
  EXPECT_EQ(d.max_length(), 32768);
}

TEST(LengthProfiles, ScaledLongtailKeepsItsShapeAndMinimum) {
  SyntheticDataSection s;
  s.vocab_size = 64;
  s.lengths = LengthSource::kProfile;
  s.length_profile = "longtail";
  s.length_scale = 1.0 / 256;  // 8192..73728 -> 32..288
  const auto components = synthetic_length_components(s);
  ASSERT_EQ(components.size(), 4u);
  EXPECT_EQ(components.front().min_tokens, 32);
  EXPECT_EQ(components.back().max_tokens, 288);
  s.length_scale = 1e-6;  // every bound raised to the task's minimum (prompt 4 + 1)
  for (const auto& c : synthetic_length_components(s)) EXPECT_EQ(c.min_tokens, 5);
  EXPECT_THROW(length_profile("chatqa"), std::invalid_argument);
}

TEST(LengthFile, ScaledLengthsAndErrorsNamingTheLine) {
  SyntheticDataSection s;
  s.vocab_size = 64;
  s.lengths = LengthSource::kFile;
  s.length_scale = 0.5;
  s.length_file = temp_file("lengths.txt", "100\n\n40\n 64 \n").string();
  EXPECT_EQ(synthetic_file_lengths(s), (std::vector<int64_t>{50, 20, 32}));
  SyntheticDataset d(s, 3);
  std::set<int64_t> seen;
  for (int64_t id = 0; id < 200; ++id) seen.insert(d.sample(id).length());
  EXPECT_EQ(seen, (std::set<int64_t>{50, 20, 32}));
  s.length_file = temp_file("bad_lengths.txt", "100\n12x\n").string();
  try {
    synthetic_file_lengths(s);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("bad_lengths.txt:2"), std::string::npos) << e.what();
  }
}

TEST(RetrievalTask, AnswerFollowsTheOnlyEarlierOccurrenceOfTheKey) {
  const RetrievalTaskOptions options{40, 2, 5};  // a small vocabulary forces key collisions
  DeterministicRng rng(17);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t length = rng.uniform_int(retrieval_min_length(options), 300);
    const RetrievalSample s = make_retrieval_sample(options, length, rng);
    ASSERT_EQ(static_cast<int64_t>(s.tokens.size()), length);
    const int64_t haystack = length - 1 - 2 - 5;
    EXPECT_EQ(s.tokens[static_cast<size_t>(haystack)], 0);  // query marker
    EXPECT_EQ(s.prompt_tokens, length - 5);
    for (int64_t j = 0; j < 7; ++j) {  // key + answer copy the haystack at the source
      EXPECT_EQ(s.tokens[static_cast<size_t>(haystack + 1 + j)], s.tokens[static_cast<size_t>(s.source_offset + j)]);
    }
    int occurrences = 0;
    for (int64_t p = 0; p + 2 <= haystack; ++p) {
      occurrences += s.tokens[static_cast<size_t>(p)] == s.tokens[static_cast<size_t>(haystack + 1)] &&
                     s.tokens[static_cast<size_t>(p + 1)] == s.tokens[static_cast<size_t>(haystack + 2)];
    }
    EXPECT_EQ(occurrences, 1) << "trial " << trial;
    for (int64_t t = 0; t < haystack; ++t) EXPECT_GE(s.tokens[static_cast<size_t>(t)], 2);
  }
  EXPECT_THROW(make_retrieval_sample(options, retrieval_min_length(options) - 1, rng), std::invalid_argument);
}

TEST(RetrievalTask, DatasetTrainsOnlyTheAnswer) {
  SyntheticDataSection s;
  s.task = SyntheticTask::kRetrieval;
  s.vocab_size = 128;
  s.answer_tokens = 6;
  s.length_mixture = {{1.0, 64, 128}};
  SyntheticDataset d(s, 2);
  const Sample a = d.sample(0);
  EXPECT_EQ(a.loss_tokens(), 6);
  EXPECT_EQ(a.tokens, SyntheticDataset(s, 2).sample(0).tokens);
  const PackedMicroBatch mb = pack_microbatch({&a});
  EXPECT_EQ(mb.loss_tokens, 6);
}

// A tokenizer with ChatML's markers as added tokens.
fs::path chatml_tokenizer() {
  test::TinyTokenizerOptions options;
  options.merges = {{"a", "s"}};
  options.added_tokens = nlohmann::json::array(
      {test::added_token_json(300, "<|im_start|>", true), test::added_token_json(301, "<|im_end|>", true)});
  return temp_file("tokenizer.json", test::tiny_tokenizer_json(options).dump());
}

TEST(ChatMlConversation, EveryAssistantTurnIsTrainedAndNothingElse) {
  const Tokenizer tokenizer = Tokenizer::from_file(chatml_tokenizer());
  const std::vector<ChatMessage> messages{
      {"system", "s"}, {"user", "q1"}, {"assistant", "as"}, {"user", "q2"}, {"assistant", "b"}};
  const ConversationTokens c = encode_chatml_conversation(tokenizer, messages);
  ASSERT_EQ(c.ids.size(), c.target.size());
  std::string trained, untrained;
  for (size_t i = 0; i < c.ids.size(); ++i) (c.target[i] ? trained : untrained) += tokenizer.decode({c.ids[i]});
  EXPECT_EQ(trained, "as<|im_end|>b<|im_end|>");
  EXPECT_EQ(tokenizer.decode(c.ids), render_chatml(messages));
}

TEST(JsonlSftDataset, LoadsConversationsAndMasksTargets) {
  const fs::path data = temp_file(
      "sft.jsonl",
      R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "as"}], "id": 7})"
      "\n\n"
      R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "yy"}, {"role": "user", "content": "z"}, {"role": "assistant", "content": "w"}]})"
      "\n");
  JsonlDataSection config{data.string(), chatml_tokenizer().string(), TooLongRule::kError, false};
  JsonlSftDataset dataset(config, 1, DatasetLimits{512, 4096, 0});
  ASSERT_EQ(dataset.size(), 2);
  const Sample first = dataset.sample(0);
  EXPECT_EQ(first.loss_tokens(), 2);  // "as" (one merged token) and "<|im_end|>"
  const Sample second = dataset.sample(1);
  EXPECT_EQ(second.loss_tokens(), 2 + 1 + 1 + 1);  // y y <|im_end|> w <|im_end|>
  EXPECT_EQ(dataset.sample(2).tokens, first.tokens);  // epoch 1, file order
  const PackedMicroBatch mb = pack_microbatch({&first, &second});
  EXPECT_EQ(mb.loss_tokens, first.loss_tokens() + second.loss_tokens());
  expect_shapes_are_the_drawn_batches(dataset, /*iterations=*/3, /*global_batch_size=*/3);
}

TEST(JsonlSftDataset, BadLinesNameFileAndLine) {
  const fs::path tokenizer = chatml_tokenizer();
  const auto error_of = [&](const std::string& content) {
    const fs::path data = temp_file("bad.jsonl", content);
    try {
      JsonlSftDataset({data.string(), tokenizer.string(), TooLongRule::kError, false}, 1, DatasetLimits{512, 4096, 0});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string ok = R"({"messages": [{"role": "assistant", "content": "a"}]})";
  EXPECT_NE(error_of(ok + "\n" + ok + "\n{oops\n").find("bad.jsonl:3"), std::string::npos);
  EXPECT_NE(error_of(ok + "\n" R"({"messages": [{"role": "user"}]})").find("bad.jsonl:2"), std::string::npos);
  EXPECT_NE(error_of(R"({"messages": [{"role": "user", "content": "q"}]})").find("no assistant"), std::string::npos);
  EXPECT_NE(error_of(R"({"text": "plain"})").find("messages"), std::string::npos);
}

TEST(JsonlSftDataset, TooLongConversationsErrorSkipOrTruncate) {
  const fs::path tokenizer = chatml_tokenizer();
  const fs::path data = temp_file(
      // "<|im_start|>assistant\n" is 10 tokens ("as" merges), the closing "<|im_end|>\n" 2:
      // 28 tokens for the first conversation, 13 for the second; capacity 16.
      "long.jsonl", R"({"messages": [{"role": "assistant", "content": "bcdefghijklmnopq"}]})"
                    "\n" R"({"messages": [{"role": "assistant", "content": "a"}]})" "\n");
  try {
    JsonlSftDataset({data.string(), tokenizer.string(), TooLongRule::kError, false}, 1, DatasetLimits{512, 16, 0});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("long.jsonl:1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("too_long"), std::string::npos);
  }
  JsonlSftDataset skipped({data.string(), tokenizer.string(), TooLongRule::kSkip, false}, 1, DatasetLimits{512, 16, 0});
  EXPECT_EQ(skipped.size(), 1);
  EXPECT_EQ(skipped.skipped(), 1);
  JsonlSftDataset truncated({data.string(), tokenizer.string(), TooLongRule::kTruncate, false}, 1, DatasetLimits{512, 16, 0});
  EXPECT_EQ(truncated.size(), 2);
  EXPECT_EQ(truncated.truncated(), 1);
  EXPECT_EQ(truncated.sample(0).length(), 16);
  EXPECT_EQ(truncated.sample(0).loss_tokens(), 6);  // the first 6 content tokens survive
  EXPECT_EQ(truncated.max_length(), 16);
  // Cut to 8 tokens no conversation keeps an assistant token: none is trained on nothing,
  // and an empty data set is an error.
  EXPECT_THROW(JsonlSftDataset({data.string(), tokenizer.string(), TooLongRule::kTruncate, false}, 1, DatasetLimits{512, 8, 0}), ConfigError);
}

TEST(JsonlSftDataset, ConversationsPastTheModelsPositionsNameTheLineOrFollowTooLong) {
  const fs::path tokenizer = chatml_tokenizer();
  const fs::path data = temp_file(  // 28 and 13 tokens, as above
      "positions.jsonl", R"({"messages": [{"role": "assistant", "content": "bcdefghijklmnopq"}]})"
                         "\n" R"({"messages": [{"role": "assistant", "content": "a"}]})" "\n");
  // The micro-batch holds 4096 tokens but the model has 16 positions: the positions bind.
  const DatasetLimits limits{512, 4096, 16};
  try {
    JsonlSftDataset({data.string(), tokenizer.string(), TooLongRule::kError, false}, 1, limits);
    FAIL();
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("positions.jsonl:1"), std::string::npos) << message;
    EXPECT_NE(message.find("the model's 16 positions"), std::string::npos) << message;
    EXPECT_EQ(message.find("max_tokens_per_microbatch ="), std::string::npos) << message;
  }
  JsonlSftDataset skipped({data.string(), tokenizer.string(), TooLongRule::kSkip, false}, 1, limits);
  EXPECT_EQ(skipped.size(), 1);
  JsonlSftDataset truncated({data.string(), tokenizer.string(), TooLongRule::kTruncate, false}, 1, limits);
  EXPECT_EQ(truncated.max_length(), 16);
}

TEST(JsonlSftDataset, ShuffleIsAPermutationPerEpochFixedBySeed) {
  std::string content;
  for (int i = 0; i < 10; ++i) {
    content += R"({"messages": [{"role": "assistant", "content": ")" + std::string(static_cast<size_t>(i + 1), 'a') + "\"}]}\n";
  }
  const fs::path data = temp_file("many.jsonl", content);
  JsonlSftDataset a({data.string(), chatml_tokenizer().string(), TooLongRule::kError, true}, 5, DatasetLimits{512, 4096, 0});
  JsonlSftDataset b({data.string(), chatml_tokenizer().string(), TooLongRule::kError, true}, 5, DatasetLimits{512, 4096, 0});
  std::set<std::vector<int64_t>> epoch0, epoch1;
  bool differs_from_file_order = false, epochs_differ = false;
  JsonlSftDataset ordered({data.string(), chatml_tokenizer().string(), TooLongRule::kError, false}, 5, DatasetLimits{512, 4096, 0});
  for (int64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(a.sample(i).tokens, b.sample(i).tokens);
    epoch0.insert(a.sample(i).tokens);
    epoch1.insert(a.sample(10 + i).tokens);
    differs_from_file_order = differs_from_file_order || a.sample(i).tokens != ordered.sample(i).tokens;
    epochs_differ = epochs_differ || a.sample(i).tokens != a.sample(10 + i).tokens;
  }
  EXPECT_EQ(epoch0.size(), 10u);
  EXPECT_EQ(epoch1, epoch0);
  EXPECT_TRUE(differs_from_file_order);
  EXPECT_TRUE(epochs_differ);
}

}  // namespace
}  // namespace sb
