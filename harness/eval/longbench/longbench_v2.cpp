#include "harness/eval/longbench/longbench_v2.h"

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/common/progress_eta.h"
#include "harness/eval/json_records.h"
#include "harness/eval/longbench/python_json.h"
#include "harness/eval/longbench/python_text.h"
#include "harness/eval/resumable_jsonl.h"
#include "models/qwen2/qwen2_generate.h"

namespace sb {
namespace {

using nlohmann::ordered_json;

// The first "<prefix>X<suffix>" with X in A-D, as re.search finds it.
std::optional<std::string> search_choice(const std::string& text, const std::string& prefix, const std::string& suffix) {
  for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at + 1)) {
    const size_t x = at + prefix.size();
    if (x < text.size() && text[x] >= 'A' && text[x] <= 'D' && text.compare(x + 1, suffix.size(), suffix) == 0) {
      return std::string(1, text[x]);
    }
  }
  return std::nullopt;
}

ordered_json accuracy(int64_t correct, int64_t total) {
  if (total == 0) return nullptr;
  return python_round(100.0 * static_cast<double>(correct) / static_cast<double>(total), 1);
}

// context[:1000] in code points.
std::string first_characters(const std::string& text, size_t n) {
  const std::u32string chars = utf8_to_u32(text);
  return u32_to_utf8(std::u32string_view(chars).substr(0, n));
}

}  // namespace

std::optional<std::string> longbench_v2_extract_answer(const std::string& response) {
  std::string text;
  for (char c : response) {
    if (c != '*') text.push_back(c);
  }
  if (auto x = search_choice(text, "The correct answer is (", ")")) return x;
  return search_choice(text, "The correct answer is ", "");
}

ordered_json score_longbench_v2_records(const std::vector<ordered_json>& records, const std::string& where) {
  struct Group {
    int64_t correct = 0, total = 0;
  };
  Group all, easy, hard, short_, medium, long_;
  for (size_t i = 0; i < records.size(); ++i) {
    const ordered_json& r = records[i];
    const std::string at = where + ":" + std::to_string(i + 1);
    if (!r.contains("judge") || !r["judge"].is_boolean()) throw ConfigError(at, "$.judge", "expected true or false");
    for (const char* key : {"difficulty", "length"}) {
      if (!r.contains(key) || !r[key].is_string()) throw ConfigError(at, std::string("$.") + key, "expected a string");
    }
    const int64_t ok = r["judge"].get<bool>() ? 1 : 0;
    Group& by_difficulty = r["difficulty"] == "easy" ? easy : hard;
    Group& by_length = r["length"] == "short" ? short_ : r["length"] == "medium" ? medium : long_;
    for (Group* g : {&all, &by_difficulty, &by_length}) {
      g->correct += ok;
      g->total += 1;
    }
  }
  ordered_json result = ordered_json::object();
  const std::pair<const char*, Group*> groups[] = {{"overall", &all}, {"easy", &easy},     {"hard", &hard},
                                                   {"short", &short_}, {"medium", &medium}, {"long", &long_}};
  ordered_json counts = ordered_json::object();
  for (const auto& [name, g] : groups) {
    result[name] = accuracy(g->correct, g->total);
    counts[name] = g->total;
  }
  result["counts"] = counts;
  return result;
}

ordered_json predict_longbench_v2(ModelFolder& model, const LongBenchV2Options& options, std::ostream& progress) {
  if (!model.tokenizer) throw ConfigError(model.dir.string(), "", "has no tokenizer.json", "LongBench v2 needs it");
  if (options.max_length < 2) throw ConfigError("--max-length", "", "must be >= 2");
  const LongBenchConfig config = load_longbench_config(options.config_dir);
  if (!config.v2_template) {
    throw ConfigError((options.config_dir / "v2_0shot.txt").string(), "", "is missing",
                      "copy upstream's prompts/0shot.txt there as v2_0shot.txt");
  }
  std::vector<ordered_json> items = read_json_records(options.data_file);
  if (options.limit > 0 && static_cast<int64_t>(items.size()) > options.limit) items.resize(options.limit);
  const std::filesystem::path predictions = options.out_dir / "longbench_v2.jsonl";
  ResumableJsonl out(predictions);
  if (out.existing().size() > items.size()) {
    throw ConfigError(predictions.string(), "", "has more lines than the data has questions", "use a fresh --out");
  }
  for (size_t i = 0; i < out.existing().size(); ++i) {
    if (out.existing()[i].value("_id", ordered_json()) != items[i].value("_id", ordered_json())) {
      throw ConfigError(predictions.string() + ":" + std::to_string(i + 1), "$._id",
                        "does not match the data's question at that position", "use a fresh --out folder");
    }
  }
  progress << "longbench-v2: " << items.size() << " questions, " << out.existing().size() << " already predicted\n";
  GreedyOptions generation;
  generation.max_new_tokens = options.max_new_tokens;
  generation.stop_ids = model.generation_eos_token_ids;
  generation.repetition_penalty = options.repetition_penalty;
  const ProgressEta eta(static_cast<int64_t>(items.size()), static_cast<int64_t>(out.existing().size()));
  for (size_t i = out.existing().size(); i < items.size(); ++i) {
    const ordered_json& item = items[i];
    const std::string where = options.data_file.string() + " item " + std::to_string(i + 1);
    const std::string prompt = truncate_middle_v2(*model.tokenizer, longbench_v2_prompt(*config.v2_template, item, where),
                                                  options.max_length);
    const std::vector<int64_t> ids = model.tokenizer->encode(apply_chat_style(prompt, options.chat));
    std::vector<int64_t> generated;
    try {
      generated = qwen2_generate_greedy(model.model, ids, generation);
    } catch (const std::invalid_argument& e) {
      throw ConfigError(where, "", e.what(), "lower --max-length or use a model with more positions");
    }
    const std::string response = u32_to_utf8(python_strip(utf8_to_u32(model.tokenizer->decode(generated, true))));
    const std::optional<std::string> pred = longbench_v2_extract_answer(response);
    ordered_json line = item;
    line["context"] = first_characters(item.value("context", ""), 1000);
    line["response"] = response;
    line["pred"] = pred ? ordered_json(*pred) : ordered_json(nullptr);
    line["judge"] = pred.has_value() && item.contains("answer") && item["answer"] == *pred;
    out.append(line);
    if (eta.due(static_cast<int64_t>(i + 1))) progress << "longbench-v2: " << eta.line(static_cast<int64_t>(i + 1)) << "\n";
  }
  ordered_json result = score_longbench_v2_records(read_json_records(predictions), predictions.string());
  write_file_atomic(options.out_dir / "longbench_v2_result.json", python_json_dumps(result, 4) + "\n");
  return result;
}

}  // namespace sb
