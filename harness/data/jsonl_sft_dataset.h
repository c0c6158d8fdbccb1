#pragma once
// SFT conversations from a JSONL file (data.source = "jsonl"), one per line:
//   {"messages": [{"role": "system" | "user" | "assistant" | ..., "content": "..."}, ...]}
// Other top-level keys (ids, sources) are ignored. Each conversation becomes ChatML
// tokens with every assistant turn trained (encode_chatml_conversation in
// models/tokenizer/chat_template.h), using the tokenizer.json the manifest names.
//
// The whole file is read, checked and tokenized when the dataset is built, before
// training starts: a malformed line is a ConfigError naming file:line and the problem;
// a conversation longer than the micro-batch capacity is an error, is skipped, or is
// cut to the capacity (data.jsonl.too_long), and so is one with nothing to train on.
//
// Sample id i reads conversation order_e[i mod N] of epoch e = i / N, where order_e is a
// permutation seeded by (seed, e) when shuffle is on, the file order otherwise.

#include <cstdint>
#include <string>
#include <vector>

#include "harness/data/data_spec.h"
#include "harness/data/dataset.h"
#include "harness/data/epoch_order.h"

namespace sb {

class JsonlSftDataset : public Dataset {
 public:
  JsonlSftDataset(const JsonlDataSection& config, int64_t seed, const DatasetLimits& limits);

  Sample sample(int64_t id) const override;
  SampleShape shape(int64_t id) const override;
  int64_t max_length() const override { return max_length_; }
  std::string describe() const override;

  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t skipped() const { return skipped_; }
  int64_t truncated() const { return truncated_; }

 private:
  JsonlDataSection config_;
  EpochOrder order_;
  std::vector<std::vector<int32_t>> tokens_;   // [conversation][token]
  std::vector<std::vector<uint8_t>> targets_;  // [conversation][token]
  int64_t max_length_ = 0;
  int64_t skipped_ = 0;
  int64_t truncated_ = 0;
};

}  // namespace sb
