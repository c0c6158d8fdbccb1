#include "harness/eval/ruler/ruler_eval.h"

#include <algorithm>
#include <fstream>

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/common/progress_eta.h"
#include "harness/common/system_info.h"
#include "harness/eval/eval_stamp.h"
#include "harness/eval/json_records.h"
#include "harness/eval/python_package_dir.h"
#include "harness/eval/longbench/python_json.h"
#include "harness/eval/resumable_jsonl.h"
#include "harness/eval/ruler/ruler_generators.h"
#include "harness/eval/ruler/ruler_score.h"
#include "harness/eval/ruler/ruler_size_search.h"
#include "models/qwen2/qwen2_generate.h"

namespace sb {

using nlohmann::ordered_json;
namespace fs = std::filesystem;

std::vector<std::string> ruler_task_names(const RulerOptions& options) {
  if (!options.tasks.empty()) return options.tasks;
  std::vector<std::string> names;
  for (const RulerTask& task : ruler_tasks()) {
    if (task.dataset == "squad" && options.squad.empty()) continue;
    if (task.dataset == "hotpotqa" && options.hotpotqa.empty()) continue;
    names.push_back(task.name);
  }
  return names;
}

namespace {

RulerInputs load_inputs(const ModelFolder& model, const RulerOptions& options, std::string* words_version) {
  RulerInputs inputs;
  const Tokenizer& tok = *model.tokenizer;
  inputs.count_tokens = [&tok](const std::string& text) { return static_cast<int64_t>(tok.encode(text).size()); };
  inputs.seed = options.seed;
  const fs::path words = locate_wonderwords_assets(options.words_dir, "--words-dir");
  // assets/ sits in site-packages/wonderwords/; "" when no dist-info is beside it.
  *words_version = installed_package_version(words.parent_path().parent_path(), "wonderwords");
  inputs.nouns = read_ruler_word_list(words / "nounlist.txt");
  inputs.adjectives = read_ruler_word_list(words / "adjectivelist.txt");
  inputs.verbs = read_ruler_word_list(words / "verblist.txt");
  inputs.essay_words = ruler_essay_words(read_ruler_haystack(options.haystack, options.seed));
  inputs.squad = options.squad;
  inputs.hotpotqa = options.hotpotqa;
  if (!options.cwe_words.empty()) {
    std::ifstream in(options.cwe_words);
    if (!in) throw ConfigError(options.cwe_words.string(), "", "cannot be read", "check --cwe-words");
    try {
      for (const auto& [key, value] : nlohmann::ordered_json::parse(in).items()) {
        inputs.cwe_fallback_words.push_back(value.get<std::string>());
      }
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError(options.cwe_words.string(), "", std::string("is not a JSON object of words: ") + e.what());
    }
  }
  return inputs;
}

// What a task's samples were drawn from: kept beside them, so that samples from other
// settings are never reused.
// Only what the task reads counts, so adding --squad later keeps the other tasks' samples.
ordered_json generation_settings(const RulerTask& task, int64_t length, const RulerOptions& options,
                                 const ordered_json& model, const std::string& words_version) {
  ordered_json j = ordered_json::object();
  j["task"] = task.name;
  j["length"] = length;
  j["samples"] = options.samples;
  j["seed"] = options.seed;
  j["tokenizer_fnv1a64"] = model["tokenizer_fnv1a64"];
  if (task.family == RulerFamily::kNiah && task.needle_k == "words") j["wonderwords"] = words_version;
  if (task.family == RulerFamily::kCommonWords) {
    j["wonderwords"] = words_version;
    j["cwe_words"] = options.cwe_words.string();
  }
  if (task.haystack == "essay") j["haystack"] = options.haystack;
  if (task.dataset == "squad") j["squad"] = options.squad.string();
  if (task.dataset == "hotpotqa") j["hotpotqa"] = options.hotpotqa.string();
  return j;
}

// <L>/data/<task>/validation.jsonl: kept when it holds `samples` records drawn with the
// same settings (generation.json), else written anew; ConfigError for other settings.
std::vector<RulerRecord> task_samples(const RulerTask& task, int64_t length, const RulerOptions& options,
                                      RulerInputs& inputs, const ordered_json& model, const std::string& words_version,
                                      std::ostream& progress) {
  const fs::path dir = options.out_dir / std::to_string(length) / "data" / task.name;
  const fs::path file = dir / "validation.jsonl";
  const fs::path stamp = dir / "generation.json";
  const ordered_json settings = generation_settings(task, length, options, model, words_version);
  if (fs::exists(stamp)) {
    std::ifstream in(stamp);
    const ordered_json kept = ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (kept != settings) {
      throw ConfigError(stamp.string(), "", "holds samples drawn with other settings (" + kept.dump() + ")",
                        "use a fresh --out folder for other settings");
    }
  }
  if (fs::exists(file) && fs::exists(stamp)) {
    const std::vector<ordered_json> lines = read_json_records(file);
    if (static_cast<int64_t>(lines.size()) == options.samples) {
      std::vector<RulerRecord> records;
      for (size_t i = 0; i < lines.size(); ++i) {
        records.push_back(ruler_record_from_json(lines[i], file.string() + ":" + std::to_string(i + 1)));
      }
      return records;
    }
  }
  progress << "ruler " << task.name << " @ " << length << ": generating " << options.samples << " samples\n";
  std::vector<RulerRecord> records;
  try {
    records = generate_ruler_samples(task, length, options.samples, inputs);
  } catch (const RulerTooShort& e) {
    throw ConfigError("--lengths", "", e.what(), "use a longer length");
  }
  std::string text;
  for (const RulerRecord& r : records) text += python_json_dumps_ascii(ruler_record_json(r)) + "\n";
  write_file_atomic(file, text);
  write_file_atomic(stamp, python_json_dumps(settings, 2) + "\n");
  return records;
}

// <L>/pred/<task>.jsonl, resumed; greedy decoding of tokens_to_generate after input + answer prefix.
std::vector<ordered_json> task_predictions(ModelFolder& model, const RulerTask& task, int64_t length,
                                           const std::vector<RulerRecord>& records, const RulerOptions& options,
                                           std::ostream& progress) {
  ResumableJsonl file(options.out_dir / std::to_string(length) / "pred" / (task.name + ".jsonl"), /*ensure_ascii=*/true);
  if (file.existing().size() > records.size()) {
    throw ConfigError(file.path().string(), "", "has more predictions than the " + std::to_string(records.size()) +
                                                    " samples", "use a fresh output folder or more --samples");
  }
  std::vector<ordered_json> lines = file.existing();
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].value("index", int64_t{-1}) != records[i].index ||
        lines[i].value("input", std::string()) != records[i].input + records[i].answer_prefix) {
      throw ConfigError(file.path().string() + ":" + std::to_string(i + 1), "", "predicts another sample",
                        "use a fresh output folder for other settings");
    }
  }
  GreedyOptions generation;
  generation.max_new_tokens = ruler_template(task.family).tokens_to_generate;
  generation.stop_ids = model.generation_eos_token_ids;
  ProgressEta eta(static_cast<int64_t>(records.size()), static_cast<int64_t>(lines.size()));
  for (size_t i = lines.size(); i < records.size(); ++i) {
    const RulerRecord& r = records[i];
    const std::string prompt = r.input + r.answer_prefix;
    const std::vector<int64_t> ids = model.tokenizer->encode(prompt);
    const std::string pred =
        model.tokenizer->decode(qwen2_generate_greedy(model.model, ids, generation), /*skip_special=*/true);
    ordered_json line = ordered_json::object();
    line["index"] = r.index;
    line["pred"] = pred;
    line["input"] = prompt;
    line["outputs"] = r.outputs;
    line["others"] = ordered_json::object();
    line["truncation"] = -1;
    line["length"] = r.length;
    file.append(line);
    lines.push_back(line);
    if (eta.due(static_cast<int64_t>(i + 1))) {
      progress << "ruler " << task.name << " @ " << length << ": " << eta.line(static_cast<int64_t>(i + 1)) << "\n";
    }
  }
  return lines;
}

}  // namespace

ordered_json run_ruler(ModelFolder& model, const RulerOptions& options, std::ostream& progress) {
  if (!model.tokenizer) throw ConfigError(model.dir.string(), "", "has no tokenizer.json", "RULER needs it");
  if (options.lengths.empty()) throw ConfigError("--lengths", "", "needs at least one length");
  if (options.samples < 1) throw ConfigError("--samples", "", "must be >= 1");
  if (options.seed > 0xFFFFFFFFull) {
    throw ConfigError("--seed", "", "must be below 2^32 (numpy's seed range)", "RULER uses 42");
  }
  for (int64_t length : options.lengths) {
    if (length < 256) throw ConfigError("--lengths", "", "lengths must be >= 256 tokens, got " + std::to_string(length));
  }
  const int64_t positions = qwen2_position_limit(model.model->config());
  for (int64_t length : options.lengths) {
    if (length > positions) {
      throw ConfigError("--lengths", "", std::to_string(length) + " tokens exceed the model's " +
                                             std::to_string(positions) + " positions", "use shorter lengths");
    }
  }
  std::vector<const RulerTask*> tasks;
  for (const std::string& name : ruler_task_names(options)) {
    const RulerTask* task = &ruler_task(name, "--tasks");
    if (std::find(tasks.begin(), tasks.end(), task) != tasks.end()) {
      throw ConfigError("--tasks", "", "names " + name + " twice", "give each task once");
    }
    tasks.push_back(task);
    if (tasks.back()->dataset == "squad" && options.squad.empty()) {
      throw ConfigError("--squad", "", "qa_1 needs SQuAD v2.0's dev-v2.0.json", "pass --squad FILE or drop qa_1");
    }
    if (tasks.back()->dataset == "hotpotqa" && options.hotpotqa.empty()) {
      throw ConfigError("--hotpotqa", "", "qa_2 needs HotpotQA's hotpot_dev_distractor_v1.json",
                        "pass --hotpotqa FILE or drop qa_2");
    }
  }
  std::string words_version;
  RulerInputs inputs = load_inputs(model, options, &words_version);
  const ordered_json identity = eval_model_identity(model);
  ordered_json scores = ordered_json::object(), averages = ordered_json::object(), nulls = ordered_json::object();
  for (int64_t length : options.lengths) {
    std::vector<RulerTaskScore> at_length;
    for (const RulerTask* task : tasks) {
      const std::vector<RulerRecord> records = task_samples(*task, length, options, inputs, identity, words_version, progress);
      if (options.prepare_only) continue;
      check_or_write_eval_stamp(options.out_dir / std::to_string(length) / "pred" / "model.json", identity);
      const auto lines = task_predictions(model, *task, length, records, options, progress);
      at_length.push_back(score_ruler_task(*task, lines, task->name));
      scores[task->name][std::to_string(length)] = at_length.back().score;
      nulls[task->name][std::to_string(length)] = at_length.back().nulls;
    }
    if (at_length.empty()) continue;
    const fs::path pred = options.out_dir / std::to_string(length) / "pred";
    write_file_atomic(pred / (at_length.size() > 1 ? "summary.csv" : "summary-" + at_length[0].task + ".csv"),
                      ruler_summary_csv(at_length));
    double sum = 0;
    for (const RulerTaskScore& s : at_length) sum += s.score;
    averages[std::to_string(length)] = sum / static_cast<double>(at_length.size());
  }
  ordered_json out = ordered_json::object();
  out["lengths"] = options.lengths;
  out["tasks"] = ruler_task_names(options);
  out["samples"] = options.samples;
  out["scores"] = scores;      // percent, [task][length]
  out["average"] = averages;   // unweighted mean over the tasks, per length
  out["nulls"] = nulls;
  out["haystack"] = options.haystack;
  out["seed"] = options.seed;
  out["model_template"] = "base";
  out["wonderwords"] = words_version;
  out["model"] = identity;
  out["context"] = ordered_json::parse(collect_system_info().dump());
  if (!options.prepare_only) write_file_atomic(options.out_dir / "ruler.json", python_json_dumps(out, 2) + "\n");
  return out;
}

}  // namespace sb
