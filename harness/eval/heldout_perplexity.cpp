#include "harness/eval/heldout_perplexity.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/errors.h"
#include "harness/eval/json_records.h"
#include "harness/eval/token_nll.h"

namespace sb {

nlohmann::ordered_json heldout_perplexity(ModelFolder& model, const HeldoutOptions& options) {
  if (options.window < 2) throw ConfigError("--max-length", "", "windows need at least 2 tokens");
  const int64_t positions = qwen2_position_limit(model.model->config());
  if (options.window > positions) {
    throw ConfigError("--max-length", "", "the window of " + std::to_string(options.window) +
                                              " tokens exceeds the model's " + std::to_string(positions) + " positions");
  }
  if (options.stride < 0 || (options.stride > 0 && options.stride >= options.window)) {
    throw ConfigError("--stride", "", "must be 0 (disjoint windows) or in [1, window) for sliding windows, got " +
                                           std::to_string(options.stride));
  }
  if (options.bucket_tokens < 0) throw ConfigError("--bucket-tokens", "", "must be >= 0 (0: no position buckets)");
  struct Bucket {
    double nll = 0;
    int64_t tokens = 0;
  };
  std::map<int64_t, Bucket> buckets;  // by position / bucket_tokens
  std::vector<nlohmann::ordered_json> records = read_json_records(options.data);
  if (options.limit > 0 && static_cast<int64_t>(records.size()) > options.limit) records.resize(options.limit);
  double total_nll = 0;
  int64_t tokens = 0, windows = 0, skipped = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const auto& r = records[i];
    const std::string where = options.data.string() + ":" + std::to_string(i + 1);
    std::vector<int64_t> ids;
    if (r.contains("input_ids") && r["input_ids"].is_array()) {
      for (const auto& id : r["input_ids"]) {
        if (!id.is_number_integer()) throw ConfigError(where, "$.input_ids", "expected integers");
        ids.push_back(id.get<int64_t>());
      }
    } else if (r.contains("text") && r["text"].is_string()) {
      ids = model.encode(r["text"].get<std::string>(), where + " $.text");
    } else {
      throw ConfigError(where, "$", "expected {\"text\": \"...\"} or {\"input_ids\": [...]}");
    }
    if (ids.size() < 2) {
      ++skipped;
      continue;
    }
    const int64_t n = static_cast<int64_t>(ids.size());
    const int64_t step = options.stride > 0 ? options.stride : options.window;
    int64_t scored_until = 1;  // tokens before this index are scored (token 0 never is)
    for (int64_t start = 0; scored_until < n; start += step) {
      const int64_t end = std::min(n, start + options.window);
      if (end - start < 2) break;  // a disjoint tail of one token: nothing to predict
      TokenNll window;
      try {
        window = token_nll(model.model, std::vector<int64_t>(ids.begin() + start, ids.begin() + end));
      } catch (const std::invalid_argument& e) {
        throw ConfigError(where, "", e.what(), "fix that document");
      }
      // per_token[t] predicts token start + t + 1 from t + 1 tokens of context.
      for (int64_t t = std::max<int64_t>(0, scored_until - start - 1); t < end - start - 1; ++t) {
        total_nll += window.per_token[t];
        ++tokens;
        if (options.bucket_tokens > 0) {
          Bucket& b = buckets[(t + 1) / options.bucket_tokens];
          b.nll += window.per_token[t];
          ++b.tokens;
        }
      }
      scored_until = end;
      ++windows;
    }
  }
  if (tokens == 0) throw ConfigError(options.data.string(), "", "has no document with at least 2 tokens");
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  out["documents"] = static_cast<int64_t>(records.size()) - skipped;
  out["skipped_documents"] = skipped;
  out["windows"] = windows;
  out["tokens"] = tokens;
  out["window"] = options.window;
  out["stride"] = options.stride;
  // Standard JSON has no NaN or Infinity (a diverged model's NLL, an overflowing exp):
  // such a value is written as null.
  const auto finite_or_null = [](double x) { return std::isfinite(x) ? nlohmann::ordered_json(x) : nlohmann::ordered_json(); };
  out["nll"] = finite_or_null(total_nll / static_cast<double>(tokens));
  out["ppl"] = finite_or_null(std::exp(total_nll / static_cast<double>(tokens)));
  if (options.bucket_tokens > 0) {
    out["bucket_tokens"] = options.bucket_tokens;
    nlohmann::ordered_json by_position = nlohmann::ordered_json::array();
    for (const auto& [index, b] : buckets) {
      const double nll = b.nll / static_cast<double>(b.tokens);
      by_position.push_back({{"from", index * options.bucket_tokens},
                             {"to", (index + 1) * options.bucket_tokens},
                             {"tokens", b.tokens},
                             {"nll", finite_or_null(nll)},
                             {"ppl", finite_or_null(std::exp(nll))}});
    }
    out["by_position"] = by_position;
  }
  return out;
}

}  // namespace sb
