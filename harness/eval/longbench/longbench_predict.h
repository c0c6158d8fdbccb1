#pragma once
// LongBench v1 / LongBench-E prediction as upstream's pred.py does it, for one loaded
// model: per task, per item of <data>/<task>.jsonl (-E: <task>_e.jsonl), in file order:
//   prompt = template.format(**item); v1 middle truncation to max_length tokens;
//   the chat style unless the task is one of trec, triviaqa, samsum, lsht, lcc,
//   repobench-p; tokenize; greedy decoding with the task's max new tokens, stopping at
//   the model's generation eos ids; samsum stops at [tokenizer eos, the last id of
//   tokenize("\n")] and must produce at least one token (upstream's min_length);
//   pred = decode(new ids, skipping special tokens).
// Each prediction is appended to <out>/<task>.jsonl at once as
// {"pred", "answers", "all_classes", "length"} (upstream's format). A rerun resumes:
// items already in the file are skipped (their answers and length must match the data,
// else the file belongs to other data: error), an unfinished last line is predicted
// again.

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "harness/eval/longbench/longbench_prompt.h"
#include "harness/eval/model_folder.h"

namespace sb {

struct LongBenchPredictOptions {
  std::filesystem::path data_dir;
  std::filesystem::path config_dir;
  std::filesystem::path out_dir;
  std::vector<std::string> tasks;  // empty: upstream's list (21 tasks, or the 13 of -E)
  bool longbench_e = false;
  int64_t max_length = 31500;      // prompt tokens before the chat template (upstream's 32K setting)
  int64_t limit = 0;               // > 0: only the first `limit` items of each task
  ChatStyle chat;
  double repetition_penalty = 1.0;  // models/qwen2/qwen2_generate.h; 1: off
};

struct LongBenchPredictCounts {
  int64_t predicted = 0;  // items generated in this call
  int64_t resumed = 0;    // items found already predicted
  int64_t truncated = 0;  // prompts shortened by the middle truncation
};

// ConfigError for unknown tasks, missing data or config entries, a model folder without
// a tokenizer, or a prediction file that does not match the data.
LongBenchPredictCounts predict_longbench(ModelFolder& model, const LongBenchPredictOptions& options,
                                         std::ostream& progress);

// The prompt ids one item gets (template, truncation, chat style, tokenization), exposed
// for tests; *truncated tells whether the middle truncation applied.
std::vector<int64_t> longbench_prompt_ids(const Tokenizer& tokenizer, const std::string& task,
                                          const std::string& prompt_template, const nlohmann::ordered_json& item,
                                          int64_t max_length, const ChatStyle& chat, const std::string& where,
                                          bool* truncated = nullptr);

}  // namespace sb
