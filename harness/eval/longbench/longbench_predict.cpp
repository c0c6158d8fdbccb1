#include "harness/eval/longbench/longbench_predict.h"

#include <chrono>

#include "common/errors.h"
#include "harness/common/progress_eta.h"
#include "harness/eval/json_records.h"
#include "harness/eval/longbench/longbench_tasks.h"
#include "harness/eval/resumable_jsonl.h"
#include "models/qwen2/qwen2_generate.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

const Tokenizer& require_tokenizer(const ModelFolder& model) {
  if (!model.tokenizer) {
    throw ConfigError(model.dir.string(), "", "has no tokenizer.json", "LongBench needs the model's tokenizer.json");
  }
  return *model.tokenizer;
}

// Stops and minimum length of one task's generation (see the header).
GreedyOptions generation_options(const ModelFolder& model, const std::string& task, int64_t max_new_tokens,
                                 double repetition_penalty) {
  GreedyOptions options;
  options.max_new_tokens = max_new_tokens;
  options.repetition_penalty = repetition_penalty;
  options.stop_ids = model.generation_eos_token_ids;
  if (task == "samsum") {
    const std::vector<int64_t> newline = require_tokenizer(model).encode("\n");
    options.stop_ids.clear();
    if (model.tokenizer_eos_token_id) options.stop_ids.push_back(*model.tokenizer_eos_token_id);
    options.stop_ids.push_back(newline.back());
    options.min_new_tokens = 1;
  }
  return options;
}

// The file's line must be the prediction of this data item: same answers and length.
void check_resumed_line(const ordered_json& line, const ordered_json& item, const std::string& where) {
  const bool same = line.contains("answers") && item.contains("answers") && line["answers"] == item["answers"] &&
                    line.value("length", ordered_json()) == item.value("length", ordered_json());
  if (!same) {
    throw ConfigError(where, "", "does not belong to the data item at that position (answers or length differ)",
                      "use a fresh --out folder, or delete the file to predict the task again");
  }
}

}  // namespace

std::vector<int64_t> longbench_prompt_ids(const Tokenizer& tokenizer, const std::string& task,
                                          const std::string& prompt_template, const ordered_json& item,
                                          int64_t max_length, const ChatStyle& chat, const std::string& where,
                                          bool* truncated) {
  const std::string prompt = python_format_fields(prompt_template, item, where);
  const std::string kept = truncate_middle_v1(tokenizer, prompt, max_length);
  if (truncated != nullptr) *truncated = kept != prompt;
  const LongBenchTask* known = find_longbench_task(task);
  ChatStyle style = chat;
  if (known != nullptr && !known->chat_template) style.chat = false;
  return tokenizer.encode(apply_chat_style(kept, style));
}

LongBenchPredictCounts predict_longbench(ModelFolder& model, const LongBenchPredictOptions& options,
                                         std::ostream& progress) {
  const Tokenizer& tokenizer = require_tokenizer(model);
  if (options.max_length < 2) throw ConfigError("--max-length", "", "must be >= 2");
  const LongBenchConfig config = load_longbench_config(options.config_dir);
  const std::vector<std::string> tasks =
      options.tasks.empty() ? longbench_task_names(options.longbench_e) : options.tasks;
  for (const std::string& task : tasks) {
    if (find_longbench_task(task) == nullptr) {
      throw ConfigError("--tasks", "", "\"" + task + "\" is not a LongBench task", "use the names of dataset2prompt.json");
    }
    if (!config.prompts.count(task) || !config.max_new_tokens.count(task)) {
      throw ConfigError(options.config_dir.string(), "", "has no prompt or max length for \"" + task + "\"");
    }
  }
  LongBenchPredictCounts counts;
  for (const std::string& task : tasks) {
    const fs::path data_file = options.data_dir / (task + (options.longbench_e ? "_e.jsonl" : ".jsonl"));
    std::vector<ordered_json> items = read_json_records(data_file);
    if (options.limit > 0 && static_cast<int64_t>(items.size()) > options.limit) items.resize(options.limit);
    ResumableJsonl out(options.out_dir / (task + ".jsonl"));
    if (out.existing().size() > items.size()) {
      throw ConfigError(out.path().string(), "", "has more lines than " + data_file.string() + " has items",
                        "use a fresh --out folder");
    }
    for (size_t i = 0; i < out.existing().size(); ++i) {
      check_resumed_line(out.existing()[i], items[i], out.path().string() + ":" + std::to_string(i + 1));
    }
    counts.resumed += static_cast<int64_t>(out.existing().size());
    progress << task << ": " << items.size() << " items, " << out.existing().size() << " already predicted"
             << (out.cut_bytes() > 0 ? " (an unfinished last line was cut off)" : "") << "\n";
    const GreedyOptions generation = generation_options(model, task, config.max_new_tokens.at(task),
                                                        options.repetition_penalty);
    const auto start = std::chrono::steady_clock::now();
    const ProgressEta eta(static_cast<int64_t>(items.size()), static_cast<int64_t>(out.existing().size()));
    for (size_t i = out.existing().size(); i < items.size(); ++i) {
      const ordered_json& item = items[i];
      const std::string where = data_file.string() + ":" + std::to_string(i + 1);
      for (const char* key : {"answers", "all_classes", "length"}) {
        if (!item.contains(key)) throw ConfigError(where, std::string("$.") + key, "missing (upstream's data has it)");
      }
      bool truncated = false;
      const std::vector<int64_t> ids = longbench_prompt_ids(tokenizer, task, config.prompts.at(task), item,
                                                            options.max_length, options.chat, where, &truncated);
      counts.truncated += truncated;
      std::vector<int64_t> generated;
      try {
        generated = qwen2_generate_greedy(model.model, ids, generation);
      } catch (const std::invalid_argument& e) {
        throw ConfigError(where, "", e.what(), "lower --max-length or use a model with more positions");
      }
      ordered_json line = ordered_json::object();
      line["pred"] = tokenizer.decode(generated, /*skip_special=*/true);
      line["answers"] = item["answers"];
      line["all_classes"] = item["all_classes"];
      line["length"] = item["length"];
      out.append(line);
      ++counts.predicted;
      if (eta.due(static_cast<int64_t>(i + 1))) progress << task << ": " << eta.line(static_cast<int64_t>(i + 1)) << "\n";
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    progress << task << ": done (" << items.size() - out.existing().size() << " predicted in " << seconds << " s)\n";
  }
  return counts;
}

}  // namespace sb
