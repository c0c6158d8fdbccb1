#include "harness/eval/ruler/ruler_score.h"

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/eval/json_records.h"
#include "harness/eval/longbench/python_json.h"
#include "harness/eval/longbench/python_text.h"

namespace sb {
namespace {

std::string lower(const std::string& text) { return u32_to_utf8(python_lower(utf8_to_u32(text, "prediction"))); }

bool contains_ignoring_case(const std::string& haystack_lowered, const std::string& reference) {
  return haystack_lowered.find(lower(reference)) != std::string::npos;
}

}  // namespace

std::string ruler_postprocess(const std::string& prediction) {
  std::u32string text = python_strip(utf8_to_u32(prediction, "prediction"));
  for (char32_t& c : text) {
    if (c < 0x20) c = U'\n';
  }
  return u32_to_utf8(python_strip(text));
}

double ruler_string_match_all(const std::vector<std::string>& predictions,
                              const std::vector<std::vector<std::string>>& references) {
  double sum = 0;
  for (size_t i = 0; i < predictions.size(); ++i) {
    const std::string pred = lower(predictions[i]);
    double found = 0;
    for (const std::string& r : references[i]) found += contains_ignoring_case(pred, r) ? 1.0 : 0.0;
    sum += found / static_cast<double>(references[i].size());
  }
  return python_round(sum / static_cast<double>(predictions.size()) * 100, 2);
}

double ruler_string_match_part(const std::vector<std::string>& predictions,
                               const std::vector<std::vector<std::string>>& references) {
  double sum = 0;
  for (size_t i = 0; i < predictions.size(); ++i) {
    const std::string pred = lower(predictions[i]);
    double best = 0;
    for (const std::string& r : references[i]) best = std::max(best, contains_ignoring_case(pred, r) ? 1.0 : 0.0);
    sum += best;
  }
  return python_round(sum / static_cast<double>(predictions.size()) * 100, 2);
}

RulerTaskScore score_ruler_task(const RulerTask& task, const std::vector<nlohmann::ordered_json>& lines,
                                const std::string& where) {
  std::vector<std::string> predictions;
  std::vector<std::vector<std::string>> references;
  int64_t empty = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    try {
      predictions.push_back(ruler_postprocess(lines[i].at("pred").get<std::string>()));
      references.push_back(lines[i].at("outputs").get<std::vector<std::string>>());
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError(where + ":" + std::to_string(i + 1), "", std::string("is not a RULER prediction: ") + e.what());
    }
    if (references.back().empty()) {
      throw ConfigError(where + ":" + std::to_string(i + 1), "$.outputs", "is empty");
    }
    empty += predictions.back().empty() ? 1 : 0;
  }
  RulerTaskScore s;
  s.task = task.name;
  s.nulls = std::to_string(empty) + "/" + std::to_string(lines.size());
  if (!lines.empty()) {
    s.score = ruler_scores_any_reference(task.family) ? ruler_string_match_part(predictions, references)
                                                      : ruler_string_match_all(predictions, references);
  }
  return s;
}

std::string ruler_summary_csv(const std::vector<RulerTaskScore>& scores) {
  std::string header = "0", tasks = "Tasks", score = "Score", nulls = "Nulls";
  for (size_t i = 0; i < scores.size(); ++i) {
    header += "," + std::to_string(i + 1);
    tasks += "," + scores[i].task;
    score += "," + python_float_repr(scores[i].score);
    nulls += "," + scores[i].nulls;
  }
  return header + "\n" + tasks + "\n" + score + "\n" + nulls + "\n";
}

std::vector<RulerTaskScore> score_ruler_prediction_dir(const std::filesystem::path& dir) {
  std::vector<RulerTaskScore> scores;
  for (const RulerTask& task : ruler_tasks()) {
    const std::filesystem::path file = dir / (task.name + ".jsonl");
    if (!std::filesystem::exists(file)) continue;
    scores.push_back(score_ruler_task(task, read_json_records(file), file.string()));
  }
  if (scores.empty()) {
    throw ConfigError(dir.string(), "", "holds no <task>.jsonl prediction file of a RULER task",
                      "give the pred folder of a RULER run");
  }
  const std::string name = scores.size() > 1 ? "summary.csv" : "summary-" + scores[0].task + ".csv";
  write_file_atomic(dir / name, ruler_summary_csv(scores));
  return scores;
}

}  // namespace sb
