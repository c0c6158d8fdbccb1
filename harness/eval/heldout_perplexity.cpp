#include "harness/eval/heldout_perplexity.h"

#include <cmath>

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
    for (size_t start = 0; start < ids.size(); start += static_cast<size_t>(options.window)) {
      const size_t end = std::min(ids.size(), start + static_cast<size_t>(options.window));
      if (end - start < 2) continue;
      TokenNll window;
      try {
        window = token_nll(model.model, std::vector<int64_t>(ids.begin() + start, ids.begin() + end));
      } catch (const std::invalid_argument& e) {
        throw ConfigError(where, "", e.what(), "fix that document");
      }
      total_nll += window.nll * static_cast<double>(window.tokens);
      tokens += window.tokens;
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
  out["nll"] = total_nll / static_cast<double>(tokens);
  out["ppl"] = std::exp(total_nll / static_cast<double>(tokens));
  return out;
}

}  // namespace sb
