#pragma once
// The synthetic "retrieval" task: a learnable associative-recall problem whose answer
// can only be found by attending far back, so that held-out loss and routing coverage
// say something about sparse attention.
//
// A sample of L tokens over the vocabulary [0, V):
//   [haystack: L - 1 - key - answer random tokens from [2, V)]
//   [token 0 = query marker][key: `key` tokens][answer: `answer` tokens]
// The key is a copy of the haystack at a random offset o, and the answer is the
// `answer` tokens that follow it there; the key occurs nowhere else in the haystack
// (other occurrences are rewritten). Everything up to the key is the prompt; only the
// answer is trained on. Token 1 is reserved (never drawn).

#include <cstdint>
#include <vector>

#include "harness/data/deterministic_rng.h"

namespace sb {

struct RetrievalTaskOptions {
  int64_t vocab_size = 256;
  int64_t key_tokens = 2;
  int64_t answer_tokens = 8;
};

// The shortest sample the task can build: a haystack holding key + answer, then the
// marker, key and answer.
int64_t retrieval_min_length(const RetrievalTaskOptions& options);

struct RetrievalSample {
  std::vector<int64_t> tokens;
  int64_t prompt_tokens = 0;  // = length - answer_tokens
  int64_t source_offset = 0;  // o: where the key starts in the haystack
};

// Everything before the answer is the prompt.
inline int64_t retrieval_prompt_tokens(const RetrievalTaskOptions& options, int64_t length) {
  return length - options.answer_tokens;
}

// Throws std::invalid_argument when length < retrieval_min_length or the vocabulary has
// fewer than 4 usable tokens.
RetrievalSample make_retrieval_sample(const RetrievalTaskOptions& options, int64_t length,
                                      DeterministicRng& rng);

}  // namespace sb
