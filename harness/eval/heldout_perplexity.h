#pragma once
// Perplexity on held-out data. Each line of a JSON-lines file is {"text": "..."} (needs
// the model's tokenizer) or {"input_ids": [...]}. A document is cut into consecutive,
// non-overlapping windows of at most `window` tokens; each window with >= 2 tokens is
// scored on its own (its first token is context only), so windows never see each other.
//   nll = sum over windows of (mean NLL x predicted tokens) / sum of predicted tokens
//   ppl = exp(nll)
// (natural log; per token of the tokenizer, not per word or byte).

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>

#include "harness/eval/model_folder.h"

namespace sb {

struct HeldoutOptions {
  std::filesystem::path data;
  int64_t window = 4096;
  int64_t limit = 0;  // > 0: only the first `limit` documents
};

// {"documents", "skipped_documents" (fewer than 2 tokens), "windows", "tokens"
// (predicted tokens), "nll", "ppl", "window"}.
nlohmann::ordered_json heldout_perplexity(ModelFolder& model, const HeldoutOptions& options);

}  // namespace sb
