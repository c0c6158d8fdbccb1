#pragma once
// The BPE model of a byte-level tokenizer.json: a vocabulary (token string -> id) and
// merges by rank. A pre-token (byte-level spelling, pretokenizer.h) starts as one
// symbol per character; the adjacent pair with the lowest merge rank (the leftmost
// one on ties) is replaced by its merged token, again and again until no adjacent pair
// has a merge. That is HF's BPE model without dropout, subword prefix or word suffix.

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sb {

// One merge rule as ids: left + right -> merged. Its rank is its index in the list.
struct BpeMerge {
  int64_t left = 0;
  int64_t right = 0;
  int64_t merged = 0;
};

class BpeModel {
 public:
  // Ids below 2^32, merges referring to vocabulary ids; the caller
  // (tokenizer_json.cpp) has checked both. A pair listed twice keeps its last rank, as
  // HF's merge map does.
  // ignore_merges: a pre-token that is itself in the vocabulary becomes that one token
  // without running the merges (HF's option; Llama 3 sets it, Qwen2 does not).
  BpeModel(std::unordered_map<std::string, int64_t> vocab, const std::vector<BpeMerge>& merges,
           bool ignore_merges);
  BpeModel(const BpeModel&) = delete;
  BpeModel& operator=(const BpeModel&) = delete;

  // Appends the ids of one pre-token. Throws std::invalid_argument for a character
  // without a vocabulary entry (impossible for byte-level input when the vocabulary
  // covers all 256 byte characters, which the loader requires).
  void tokenize(std::string_view piece, std::vector<int64_t>& ids) const;

  std::optional<int64_t> token_to_id(std::string_view token) const;
  const std::unordered_map<std::string, int64_t>& vocab() const { return vocab_; }
  size_t merge_count() const { return merges_.size(); }

 private:
  struct MergeTarget {
    uint32_t rank;
    int64_t merged;
  };
  static uint64_t pair_key(int64_t left, int64_t right) {
    return (static_cast<uint64_t>(left) << 32) | static_cast<uint64_t>(right);
  }
  std::vector<int64_t> merge_piece(std::string_view piece) const;

  std::unordered_map<std::string, int64_t> vocab_;
  std::unordered_map<uint64_t, MergeTarget> merges_;
  bool ignore_merges_ = false;

  // Pre-tokens repeat a lot in text (words, spaces, punctuation), so their merged ids
  // are remembered: up to kCacheEntries pre-tokens of at most kCacheMaxBytes bytes
  // (long pieces are rare and would make the memory unbounded); once full, new pieces
  // are computed and not stored.
  static constexpr size_t kCacheEntries = 10000;
  static constexpr size_t kCacheMaxBytes = 256;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache_;
};

}  // namespace sb
