#pragma once
// Perplexity on held-out data. Each line of a JSON-lines file is {"text": "..."} (needs
// the model's tokenizer) or {"input_ids": [...]}. Windows of at most `window` tokens:
//   stride 0 (default): consecutive, non-overlapping windows; each window with >= 2
//     tokens is scored on its own (its first token is context only), so windows never
//     see each other.
//   0 < stride < window (sliding, as transformers' perplexity guide): windows start at
//     0, stride, 2 stride, ... until one reaches the document's end; each window scores
//     only the tokens after the previous window's end (the first scores all but its
//     first token), so every token after the first is scored once, with at least
//     window - stride tokens of context once past the first window.
//   nll = sum of the scored tokens' NLL / scored tokens, ppl = exp(nll)
// (natural log; per token of the tokenizer, not per word or byte).
// By position (bucket_tokens > 0; PG-19-style loss against context length): a scored
// token's position is its index in its window (the tokens of context it had, 1 ..
// window - 1); bucket b holds positions [b x bucket_tokens, (b + 1) x bucket_tokens).
// With a window at least as long as every document, position = position in the document.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>

#include "harness/eval/model_folder.h"

namespace sb {

struct HeldoutOptions {
  std::filesystem::path data;
  int64_t window = 4096;
  int64_t limit = 0;          // > 0: only the first `limit` documents
  int64_t stride = 0;         // 0: disjoint windows; else sliding, 0 < stride < window
  int64_t bucket_tokens = 0;  // > 0: also the NLL by position, buckets of this many tokens
};

// {"documents", "skipped_documents" (fewer than 2 tokens), "windows", "tokens"
// (scored tokens), "nll", "ppl", "window", "stride"} and, with bucket_tokens,
// "bucket_tokens" and "by_position": [{"from", "to" (positions, to exclusive), "tokens",
// "nll", "ppl"}] for every bucket that holds a scored token.
nlohmann::ordered_json heldout_perplexity(ModelFolder& model, const HeldoutOptions& options);

}  // namespace sb
