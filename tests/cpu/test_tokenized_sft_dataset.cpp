// The tokenised SFT cache reader (harness/data/tokenized_sft_dataset.h) on caches this
// test writes in the documented layout: samples come back with their ids and trained
// flags, the too_long rules name the source line, and damaged, stale or foreign caches
// are refused with the rebuild command. The Python side (scripts/data/tokenize_sft.py,
// which writes real caches) is checked against transformers in
// tests/python/test_tokenize_sft.py.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "common/errors.h"
#include "harness/data/tokenized_sft_dataset.h"
#include "tests/support/batch_shape_check.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Conversation {
  std::vector<uint32_t> ids;
  std::vector<uint8_t> trained;
  int64_t line = 0;
};

template <typename T>
void write_binary(const fs::path& path, const std::vector<T>& values) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(T)));
}

json file_record(const fs::path& path) {
  struct stat info {};
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return {{"bytes", static_cast<int64_t>(info.st_size)},
          {"mtime_ns", static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec},
          {"sha256", "not checked by the reader"}};
}

// A cache of `conversations` in a fresh folder, with a data file and a tokenizer folder
// it records as its inputs.
fs::path write_cache(const std::string& name, const std::vector<Conversation>& conversations, int64_t vocab = 100) {
  const fs::path root = fs::temp_directory_path() / ("sb_tokcache_" + std::to_string(::getpid())) / name;
  fs::remove_all(root);
  fs::create_directories(root / "cache");
  fs::create_directories(root / "tokenizer");
  std::ofstream(root / "data.jsonl") << "{\"messages\": []}\n";
  std::ofstream(root / "tokenizer" / "tokenizer.json") << "{}";
  std::vector<uint32_t> tokens;
  std::vector<uint8_t> targets;
  std::vector<int64_t> offsets{0}, lines;
  for (const Conversation& c : conversations) {
    tokens.insert(tokens.end(), c.ids.begin(), c.ids.end());
    targets.insert(targets.end(), c.trained.begin(), c.trained.end());
    offsets.push_back(static_cast<int64_t>(tokens.size()));
    lines.push_back(c.line);
  }
  write_binary(root / "cache" / "tokens.u32", tokens);
  write_binary(root / "cache" / "targets.u8", targets);
  write_binary(root / "cache" / "offsets.i64", offsets);
  write_binary(root / "cache" / "lines.i64", lines);
  json data_record = file_record(root / "data.jsonl");
  data_record["path"] = (root / "data.jsonl").string();
  const json meta{
      {"format", "sparsebalance-sft-cache-1"},
      {"conversations", conversations.size()},
      {"tokens", tokens.size()},
      {"vocab_size", vocab},
      {"data", data_record},
      {"tokenizer",
       {{"dir", (root / "tokenizer").string()},
        {"files", {{"tokenizer.json", file_record(root / "tokenizer" / "tokenizer.json")}}},
        {"absent", {"chat_template.jinja"}}}},
      {"template", {{"source", "tokenizer_config.json"}}},
      {"command", "python scripts/data/tokenize_sft.py --data D --tokenizer-dir T --out C"}};
  std::ofstream(root / "cache" / "meta.json") << meta.dump(2);
  return root / "cache";
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

const std::vector<Conversation> kThree = {
    {{1, 2, 3, 4}, {0, 0, 1, 1}, 1},
    {{5, 6, 7, 8, 9, 10, 11, 12}, {0, 0, 0, 1, 1, 0, 1, 1}, 3},  // line 2 was blank
    {{13, 14, 15}, {0, 1, 1}, 4},
};

TEST(TokenizedSftDataset, SamplesAreTheCachedIdsAndTrainedFlagsInFileOrder) {
  const fs::path cache = write_cache("order", kThree);
  TokenizedSftDataset data({cache.string(), TooLongRule::kError, /*shuffle=*/false}, 7, DatasetLimits{100, 64, 0});
  ASSERT_EQ(data.size(), 3);
  EXPECT_EQ(data.max_length(), 8);
  for (int64_t id = 0; id < 6; ++id) {  // two epochs in file order
    const Sample s = data.sample(id);
    const Conversation& c = kThree[static_cast<size_t>(id % 3)];
    EXPECT_EQ(s.id, id);
    EXPECT_EQ(s.tokens, std::vector<int64_t>(c.ids.begin(), c.ids.end()));
    EXPECT_EQ(s.target_mask, c.trained);
  }
  EXPECT_EQ(data.sample(1).loss_tokens(), 4);
  EXPECT_EQ(data.tokenizer_dir(), cache.parent_path() / "tokenizer");
  expect_shapes_are_the_drawn_batches(data, /*iterations=*/3, /*global_batch_size=*/2);
}

TEST(TokenizedSftDataset, ShuffleVisitsEveryConversationOncePerEpoch) {
  const fs::path cache = write_cache("shuffle", kThree);
  TokenizedSftDataset data({cache.string(), TooLongRule::kError, /*shuffle=*/true}, 7, DatasetLimits{100, 64, 0});
  std::set<std::vector<int64_t>> orders;
  for (int64_t epoch = 0; epoch < 8; ++epoch) {
    std::vector<int64_t> order;
    for (int64_t i = 0; i < 3; ++i) order.push_back(data.sample(epoch * 3 + i).tokens.front());
    EXPECT_EQ(std::set<int64_t>(order.begin(), order.end()), (std::set<int64_t>{1, 5, 13}));
    orders.insert(order);
  }
  // Shuffled: 8 epochs of 3 conversations do not all keep one order (file order 1, 5, 13
  // every time would be 1 order; 8 seeded permutations of 3 give several).
  EXPECT_GE(orders.size(), 3u);
}

TEST(TokenizedSftDataset, TooLongConversationsNameTheirLineOrAreSkippedOrCut) {
  const fs::path cache = write_cache("too_long", kThree);
  const std::string message = error_of([&] {
    TokenizedSftDataset({cache.string(), TooLongRule::kError, false}, 1, DatasetLimits{100, 6, 0});
  });
  EXPECT_NE(message.find("data.jsonl:3"), std::string::npos) << message;
  EXPECT_NE(message.find("8 tokens"), std::string::npos) << message;
  EXPECT_NE(message.find("data.tokenized.too_long"), std::string::npos) << message;

  TokenizedSftDataset skipped({cache.string(), TooLongRule::kSkip, false}, 1, DatasetLimits{100, 6, 0});
  EXPECT_EQ(skipped.size(), 2);
  EXPECT_EQ(skipped.skipped(), 1);
  EXPECT_EQ(skipped.sample(1).tokens.front(), 13);

  // Cut to the model's 5 positions (tighter than the micro-batch): the kept prefix.
  TokenizedSftDataset cut({cache.string(), TooLongRule::kTruncate, false}, 1, DatasetLimits{100, 64, 5});
  EXPECT_EQ(cut.truncated(), 1);
  const Sample s = cut.sample(1);
  EXPECT_EQ(s.tokens, (std::vector<int64_t>{5, 6, 7, 8, 9}));
  EXPECT_EQ(s.target_mask, (std::vector<uint8_t>{0, 0, 0, 1, 1}));
}

TEST(TokenizedSftDataset, ChangedInputsMakeTheCacheStale) {
  const fs::path cache = write_cache("stale", kThree);
  std::ofstream(cache.parent_path() / "data.jsonl", std::ios::app) << "{\"messages\": []}\n";
  std::string message = error_of([&] { TokenizedSftDataset({cache.string()}, 1, DatasetLimits{100, 64, 0}); });
  EXPECT_NE(message.find("is stale"), std::string::npos) << message;
  EXPECT_NE(message.find("data.jsonl changed"), std::string::npos) << message;
  EXPECT_NE(message.find("tokenize_sft.py --data D"), std::string::npos) << message;  // meta's own command

  const fs::path other = write_cache("stale_tokenizer", kThree);
  std::ofstream(other.parent_path() / "tokenizer" / "tokenizer.json") << "{\"changed\": true}";
  message = error_of([&] { TokenizedSftDataset({other.string()}, 1, DatasetLimits{100, 64, 0}); });
  EXPECT_NE(message.find("tokenizer.json changed"), std::string::npos) << message;

  const fs::path added = write_cache("stale_added_template", kThree);
  EXPECT_NO_THROW(TokenizedSftDataset({added.string()}, 1, DatasetLimits{100, 64, 0}));
  std::ofstream(added.parent_path() / "tokenizer" / "chat_template.jinja") << "{{ messages }}";
  message = error_of([&] { TokenizedSftDataset({added.string()}, 1, DatasetLimits{100, 64, 0}); });
  EXPECT_NE(message.find("chat_template.jinja appeared"), std::string::npos) << message;
}

TEST(TokenizedSftDataset, DamagedForeignOrMissingCachesAreRefused) {
  const fs::path cache = write_cache("damaged", kThree);
  fs::resize_file(cache / "tokens.u32", 8);
  std::string message = error_of([&] { TokenizedSftDataset({cache.string()}, 1, DatasetLimits{100, 64, 0}); });
  EXPECT_NE(message.find("tokens.u32"), std::string::npos) << message;
  EXPECT_NE(message.find("damaged"), std::string::npos) << message;

  const fs::path big_vocab = write_cache("vocab", kThree, /*vocab=*/1000);
  message = error_of([&] { TokenizedSftDataset({big_vocab.string()}, 1, DatasetLimits{100, 64, 0}); });
  EXPECT_NE(message.find("$.vocab_size"), std::string::npos) << message;

  const fs::path bad_id = write_cache("bad_id", {{{1, 2, 300}, {0, 1, 1}, 1}}, /*vocab=*/100);
  TokenizedSftDataset damaged({bad_id.string()}, 1, DatasetLimits{100, 64, 0});
  message = error_of([&] { damaged.sample(0); });
  EXPECT_NE(message.find("token id 300"), std::string::npos) << message;
  EXPECT_NE(message.find("data.jsonl:1"), std::string::npos) << message;

  const fs::path empty = fs::temp_directory_path() / ("sb_tokcache_empty_" + std::to_string(::getpid()));
  fs::create_directories(empty);
  message = error_of([&] { TokenizedSftDataset({empty.string()}, 1, DatasetLimits{100, 64, 0}); });
  EXPECT_NE(message.find("no meta.json"), std::string::npos) << message;
  EXPECT_NE(message.find("tokenize_sft.py"), std::string::npos) << message;
}

}  // namespace
}  // namespace sb
