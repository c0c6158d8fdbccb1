#include "harness/eval/zeroshot/continuation_loglikelihood.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <stdexcept>

#include "harness/eval/longbench/python_text.h"

namespace sb {

EncodedRequest encode_request(const Tokenizer& tokenizer, const std::string& context, const std::string& continuation) {
  if (context.empty()) throw std::invalid_argument("a loglikelihood request needs a non-empty context");
  // context.rstrip()'s whitespace (str.isspace) moves to the continuation.
  const std::u32string ctx = utf8_to_u32(context, "context");
  size_t keep = ctx.size();
  while (keep > 0 && is_python_space(ctx[keep - 1])) --keep;
  std::string moved_context = context, moved_continuation = continuation;
  if (keep < ctx.size()) {
    moved_context = u32_to_utf8(std::u32string_view(ctx).substr(0, keep));
    moved_continuation = u32_to_utf8(std::u32string_view(ctx).substr(keep)) + continuation;
  }
  EncodedRequest out;
  const std::vector<int64_t> whole = tokenizer.encode(moved_context + moved_continuation);
  out.context = tokenizer.encode(moved_context);
  if (whole.size() > out.context.size()) out.continuation.assign(whole.begin() + out.context.size(), whole.end());
  if (out.continuation.empty()) {
    throw std::invalid_argument("the continuation \"" + continuation + "\" encodes to no tokens after its context");
  }
  return out;
}

namespace {

// Per request: the model's input (context + continuation)[-(max_length + 1):][:-1] and
// the index of the logit row that predicts the first continuation token.
struct ModelInputs {
  std::vector<std::vector<int64_t>> inputs;
  std::vector<size_t> first_scored;
};

ModelInputs model_inputs(const std::vector<EncodedRequest>& requests, int64_t max_length) {
  ModelInputs out;
  for (const EncodedRequest& r : requests) {
    if (r.context.empty()) throw std::invalid_argument("a loglikelihood request needs context tokens");
    if (static_cast<int64_t>(r.continuation.size()) > max_length) {
      throw std::invalid_argument("a continuation of " + std::to_string(r.continuation.size()) +
                                  " tokens exceeds the model's window of " + std::to_string(max_length));
    }
    std::vector<int64_t> full = r.context;
    full.insert(full.end(), r.continuation.begin(), r.continuation.end());
    if (static_cast<int64_t>(full.size()) > max_length + 1) full.erase(full.begin(), full.end() - (max_length + 1));
    full.pop_back();
    out.first_scored.push_back(full.size() - r.continuation.size());
    out.inputs.push_back(std::move(full));
  }
  return out;
}

// Sum of log-probabilities and greediness of `continuation` under rows [n, V].
ContinuationScore score_rows(const at::Tensor& rows, const std::vector<int64_t>& continuation) {
  const auto n = static_cast<int64_t>(continuation.size());
  const at::Tensor targets = at::tensor(continuation, at::kLong).to(rows.device());  // [n]
  const at::Tensor logprobs = at::log_softmax(rows.to(at::kFloat), -1).gather(1, targets.unsqueeze(1)).squeeze(1);
  ContinuationScore score;
  score.tokens = n;
  score.is_greedy = at::equal(rows.argmax(-1), targets);
  const at::Tensor lp = logprobs.to(at::kDouble).cpu();
  for (int64_t t = 0; t < n; ++t) score.loglikelihood += lp.const_data_ptr<double>()[t];
  return score;
}

}  // namespace

std::vector<ContinuationScore> score_continuations(Qwen2ForCausalLM& model, const std::vector<EncodedRequest>& requests,
                                                   int64_t max_length) {
  if (requests.empty()) return {};
  const ModelInputs prepared = model_inputs(requests, max_length);
  const auto& inputs = prepared.inputs;
  const auto& first_scored = prepared.first_scored;
  // The shared prefix, cut before the first position any request scores.
  size_t prefix = *std::min_element(first_scored.begin(), first_scored.end());
  for (const auto& input : inputs) {
    const auto mismatch = std::mismatch(inputs.front().begin(), inputs.front().begin() + prefix, input.begin());
    prefix = std::min<size_t>(prefix, mismatch.first - inputs.front().begin());
  }
  c10::NoGradGuard no_grad;
  const auto options = at::TensorOptions().dtype(at::kLong).device(model->parameters().front().device());
  const auto as_tensor = [&](const std::vector<int64_t>& ids, size_t begin) {
    return at::tensor(at::ArrayRef<int64_t>(ids.data() + begin, ids.size() - begin), at::kLong).to(options.device());
  };
  Qwen2KVCache shared;
  if (prefix > 0) {
    model->forward_cached(as_tensor(std::vector<int64_t>(inputs.front().begin(), inputs.front().begin() + prefix), 0),
                          shared, /*last_only=*/true);
  }
  std::vector<ContinuationScore> scores;
  for (size_t i = 0; i < requests.size(); ++i) {
    Qwen2KVCache cache = shared;  // the layers append by concatenation: the prefix stays intact
    const at::Tensor logits = model->forward_cached(as_tensor(inputs[i], prefix), cache);  // [tail, V]
    const auto& continuation = requests[i].continuation;
    const at::Tensor rows =
        logits.narrow(0, static_cast<int64_t>(first_scored[i] - prefix), static_cast<int64_t>(continuation.size()));
    const ContinuationScore score = score_rows(rows, continuation);
    scores.push_back(score);
  }
  return scores;
}

std::vector<ContinuationScore> score_continuations_packed(Qwen2ForCausalLM& model,
                                                          const std::vector<EncodedRequest>& requests,
                                                          int64_t max_length, int64_t batch_tokens) {
  const ModelInputs prepared = model_inputs(requests, max_length);
  c10::NoGradGuard no_grad;
  const auto device = model->parameters().front().device();
  std::vector<ContinuationScore> scores;
  for (size_t begin = 0; begin < requests.size();) {
    // One batch: requests [begin, end) whose inputs add up to at most batch_tokens.
    size_t end = begin;
    int64_t tokens = 0;
    while (end < requests.size() &&
           (end == begin || tokens + static_cast<int64_t>(prepared.inputs[end].size()) <= batch_tokens)) {
      tokens += static_cast<int64_t>(prepared.inputs[end++].size());
    }
    std::vector<int64_t> ids, positions, lengths, rows;
    for (size_t i = begin; i < end; ++i) {
      const auto offset = static_cast<int64_t>(ids.size());
      const auto& input = prepared.inputs[i];
      ids.insert(ids.end(), input.begin(), input.end());
      for (size_t p = 0; p < input.size(); ++p) positions.push_back(static_cast<int64_t>(p));
      lengths.push_back(static_cast<int64_t>(input.size()));
      for (size_t t = 0; t < requests[i].continuation.size(); ++t) {
        rows.push_back(offset + static_cast<int64_t>(prepared.first_scored[i] + t));
      }
    }
    const at::Tensor logits =
        model->forward_rows(at::tensor(ids, at::kLong).to(device), at::tensor(positions, at::kLong).to(device),
                            PackedSequences::from_lengths(lengths), at::tensor(rows, at::kLong));  // [R, V]
    int64_t row = 0;
    for (size_t i = begin; i < end; ++i) {
      const auto n = static_cast<int64_t>(requests[i].continuation.size());
      scores.push_back(score_rows(logits.narrow(0, row, n), requests[i].continuation));
      row += n;
    }
    begin = end;
  }
  return scores;
}

}  // namespace sb
