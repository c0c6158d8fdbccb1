#pragma once
// LongBench v2 (503 four-choice questions) as upstream's pred.py and result.py run it:
//   prompt     v2_0shot.txt with $DOC$, $Q$, $C_A$..$C_D$ (longbench_prompt.h), v2 middle
//              truncation to max_length tokens (one decode), the chat style, greedy
//              decoding of up to 128 new tokens (upstream samples at temperature 0.1; here
//              greedy, so that runs reproduce), response = decoded text .strip()
//   parsing    after deleting every "*": the first "The correct answer is (X)", else the
//              first "The correct answer is X", X in A-D; no match -> null
//   judge      pred == answer
//   accuracy   round(100 * correct / n, 1) overall, for difficulty "easy" / otherwise
//              "hard", and for length "short" / "medium" / otherwise "long"; null for a
//              group without questions
// Output lines (longbench_v2.jsonl, resumable): the item's fields with context cut to
// its first 1000 characters, plus response, pred, judge, as upstream writes them.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "harness/eval/longbench/longbench_prompt.h"
#include "harness/eval/model_folder.h"

namespace sb {

std::optional<std::string> longbench_v2_extract_answer(const std::string& response);

// The accuracies above from prediction records (fields judge, difficulty, length);
// `where` names the source in errors.
nlohmann::ordered_json score_longbench_v2_records(const std::vector<nlohmann::ordered_json>& records,
                                                  const std::string& where);

struct LongBenchV2Options {
  std::filesystem::path data_file;   // data.json (array) or JSON lines
  std::filesystem::path config_dir;  // holds v2_0shot.txt
  std::filesystem::path out_dir;     // longbench_v2.jsonl, longbench_v2_result.json
  int64_t max_length = 31500;
  int64_t max_new_tokens = 128;
  int64_t limit = 0;                 // > 0: only the first `limit` questions
  ChatStyle chat;
  double repetition_penalty = 1.0;  // models/qwen2/qwen2_generate.h; 1: off
};

// Predicts (resuming), then scores; writes longbench_v2_result.json atomically and
// returns it.
nlohmann::ordered_json predict_longbench_v2(ModelFolder& model, const LongBenchV2Options& options,
                                            std::ostream& progress);

}  // namespace sb
