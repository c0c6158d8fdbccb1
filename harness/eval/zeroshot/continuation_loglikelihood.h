#pragma once
// Log-likelihood of continuations given contexts, as lm-evaluation-harness's HFLM computes
// it for a causal model (lm_eval/api/model.py _encode_pair, models/huggingface.py
// _loglikelihood_tokens):
//   - trailing whitespace of the context moves to the front of the continuation;
//   - the continuation's tokens are encode(context + continuation) past the first
//     len(encode(context)) tokens (so a merge across the boundary counts as continuation);
//   - the model reads (context + continuation)[-(max_length + 1):][:-1] and the
//     continuation's log-probabilities (float32 log-softmax) are summed; is_greedy says
//     whether every continuation token is its position's argmax.
//
// score_continuations scores the requests of one document together: their longest common token prefix
// (up to the first scored position) runs once into a KV cache, and each request runs
// only its own tail on top of it, so logits exist only for the tail's positions
// (mostly the scored ones) and a question's choices share the prefix's work.

#include <cstdint>
#include <string>
#include <vector>

#include "models/qwen2/qwen2_model.h"
#include "models/tokenizer/tokenizer.h"

namespace sb {

struct EncodedRequest {
  std::vector<int64_t> context;       // non-empty
  std::vector<int64_t> continuation;  // non-empty
};

struct ContinuationScore {
  double loglikelihood = 0;  // sum of the continuation tokens' log-probabilities (nats)
  bool is_greedy = false;
  int64_t tokens = 0;        // continuation tokens
};

// lm-eval's _encode_pair. std::invalid_argument for an empty context (lm-eval would
// condition on the end-of-text token; no task here produces one) or a continuation that
// encodes to no tokens.
EncodedRequest encode_request(const Tokenizer& tokenizer, const std::string& context, const std::string& continuation);

// Scores the requests of one document; max_length is the model's window (lm-eval's
// max_length: config.json's max_position_embeddings). std::invalid_argument for a
// continuation longer than the window.
std::vector<ContinuationScore> score_continuations(Qwen2ForCausalLM& model, const std::vector<EncodedRequest>& requests,
                                                   int64_t max_length);

// The same for requests of many documents, in packed batches of at most `batch_tokens`
// input tokens (a longer request runs alone): every request's whole input is one packed
// sequence (no shared prefix), and logits are taken only at its continuation's rows.
// Fewer, larger forwards: what a GPU wants.
std::vector<ContinuationScore> score_continuations_packed(Qwen2ForCausalLM& model,
                                                          const std::vector<EncodedRequest>& requests,
                                                          int64_t max_length, int64_t batch_tokens);

}  // namespace sb
