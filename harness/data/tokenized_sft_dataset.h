#pragma once
// SFT conversations tokenised ahead of time (data.source = "tokenized"): a cache folder
// written by scripts/data/tokenize_sft.py, which renders each conversation with the
// model folder's own chat template exactly as transformers' apply_chat_template does and
// marks the assistant spans as trained. Layout (little-endian):
//   tokens.u32    every conversation's token ids, concatenated
//   targets.u8    one byte per token, 1 = trained
//   offsets.i64   N + 1 offsets: conversation i is tokens [offsets[i], offsets[i+1])
//   lines.i64     N source line numbers (1-based) in the JSONL file, for messages
//   meta.json     format, counts, vocab_size, the inputs' hashes, sizes and mtimes, the
//                 tokenizer file names looked for but absent, the rebuild command
// Every rank maps the files (harness/common/mapped_file.h), so a host holds the data
// once in its page cache; samples are copied out when drawn. The cache is checked when
// opened: its format, file sizes and offsets; its vocabulary against the model's; and
// whether the data or tokenizer files it was built from changed since (size or mtime) or
// a tokenizer file then absent has appeared, which is an error that gives the command to rebuild it. Token ids are checked against
// the cache's vocabulary as samples are drawn (a damaged cache names the line).
//
// Conversations longer than the limit follow data.tokenized.too_long
// (conversation_limit.h); sample order as EpochOrder.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "harness/common/mapped_file.h"
#include "harness/data/data_spec.h"
#include "harness/data/dataset.h"
#include "harness/data/epoch_order.h"

namespace sb {

class TokenizedSftDataset : public Dataset {
 public:
  TokenizedSftDataset(const TokenizedDataSection& config, int64_t seed, const DatasetLimits& limits);

  Sample sample(int64_t id) const override;
  // From the offsets and trained flags; token ids are read (and checked) when drawn.
  SampleShape shape(int64_t id) const override;
  int64_t max_length() const override { return max_length_; }
  std::string describe() const override;

  int64_t size() const { return static_cast<int64_t>(kept_.size()); }
  int64_t skipped() const { return skipped_; }
  int64_t truncated() const { return truncated_; }
  // The tokenizer folder the cache was built with (meta.json's tokenizer.dir).
  const std::filesystem::path& tokenizer_dir() const { return tokenizer_dir_; }

 private:
  struct Kept {
    int64_t conversation = 0;
    int64_t length = 0;  // tokens used: all, or the limit when truncated
    std::string where;   // "data.jsonl:LINE", for messages
  };

  TokenizedDataSection config_;
  EpochOrder order_;
  MappedFile tokens_, targets_, offsets_;
  std::vector<Kept> kept_;
  std::filesystem::path tokenizer_dir_;
  std::string data_path_, template_source_;
  int64_t vocab_size_ = 0;  // meta.json's; every drawn token id is below it
  int64_t max_length_ = 0;
  int64_t skipped_ = 0;
  int64_t truncated_ = 0;
};

// meta.json of a cache folder; ConfigError naming the folder and how to build one when
// it is missing or not a cache of this format.
nlohmann::json read_tokenized_cache_meta(const std::filesystem::path& dir);

}  // namespace sb
