#include "harness/data/retrieval_task.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace sb {
namespace {

constexpr int64_t kQueryMarker = 0;
constexpr int64_t kFirstHaystackToken = 2;

bool key_at(const std::vector<int64_t>& tokens, int64_t position, int64_t source, int64_t key) {
  for (int64_t j = 0; j < key; ++j) {
    if (tokens[static_cast<size_t>(position + j)] != tokens[static_cast<size_t>(source + j)]) return false;
  }
  return true;
}

}  // namespace

int64_t retrieval_min_length(const RetrievalTaskOptions& o) {
  return (o.key_tokens + o.answer_tokens) + 1 + o.key_tokens + o.answer_tokens;
}

RetrievalSample make_retrieval_sample(const RetrievalTaskOptions& o, int64_t length,
                                      DeterministicRng& rng) {
  if (o.vocab_size < kFirstHaystackToken + o.key_tokens + 1) {
    throw std::invalid_argument("retrieval task: vocab_size must exceed key_tokens + 2");
  }
  if (o.key_tokens < 1 || o.answer_tokens < 1) {
    throw std::invalid_argument("retrieval task: key_tokens and answer_tokens must be >= 1");
  }
  if (length < retrieval_min_length(o)) {
    throw std::invalid_argument("retrieval task: length " + std::to_string(length) +
                                " is below the minimum " + std::to_string(retrieval_min_length(o)));
  }
  const int64_t haystack = length - 1 - o.key_tokens - o.answer_tokens;
  const int64_t span = o.key_tokens + o.answer_tokens;
  RetrievalSample s;
  s.tokens.resize(static_cast<size_t>(length));
  // Draw until the key does not recur inside its own span (then the answer would be
  // ambiguous); with random tokens over V values that takes one draw almost always.
  bool repeats_in_span = true;
  while (repeats_in_span) {
    for (int64_t t = 0; t < haystack; ++t) {
      s.tokens[static_cast<size_t>(t)] = rng.uniform_int(kFirstHaystackToken, o.vocab_size - 1);
    }
    s.source_offset = rng.uniform_int(0, haystack - span);
    repeats_in_span = false;
    for (int64_t p = s.source_offset + 1; p < s.source_offset + span && p + o.key_tokens <= haystack; ++p) {
      repeats_in_span = repeats_in_span || key_at(s.tokens, p, s.source_offset, o.key_tokens);
    }
  }
  const int64_t source = s.source_offset;
  // Make the key unique: the first token of every other occurrence becomes a token that
  // is not in the key at all, so no window through it can match the key afterwards.
  const std::vector<int64_t> key(s.tokens.begin() + source, s.tokens.begin() + source + o.key_tokens);
  for (int64_t p = 0; p + o.key_tokens <= haystack; ++p) {
    if (p == source || !key_at(s.tokens, p, source, o.key_tokens)) continue;
    int64_t replacement = 0;
    do {
      replacement = rng.uniform_int(kFirstHaystackToken, o.vocab_size - 1);
    } while (std::find(key.begin(), key.end(), replacement) != key.end());
    s.tokens[static_cast<size_t>(p)] = replacement;
  }
  int64_t at = haystack;
  s.tokens[static_cast<size_t>(at++)] = kQueryMarker;
  for (int64_t j = 0; j < span; ++j) s.tokens[static_cast<size_t>(at++)] = s.tokens[static_cast<size_t>(source + j)];
  s.prompt_tokens = retrieval_prompt_tokens(o, length);
  return s;
}

}  // namespace sb
