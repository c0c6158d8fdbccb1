#include "harness/eval/longbench/longbench_scorer.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <limits>
#include <set>
#include <sstream>

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/common/jsonl_file.h"
#include "harness/eval/longbench/longbench_tasks.h"
#include "harness/eval/longbench/python_json.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

// numpy's float64 add.reduce over a contiguous array: pairwise summation with blocks of
// 128 and eight partial sums (numpy/_core/src/umath/loops_utils.h.src).
double numpy_pairwise_sum(const double* a, size_t n) {
  if (n < 8) {
    double s = 0.0;
    for (size_t i = 0; i < n; ++i) s += a[i];
    return s;
  }
  if (n <= 128) {
    double r[8];
    for (size_t j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - n % 8; i += 8) {
      for (size_t j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    double s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) s += a[i];
    return s;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return numpy_pairwise_sum(a, n2) + numpy_pairwise_sum(a + n2, n - n2);
}

// round(100 * np.mean(scores), 2) with numpy's mean and numpy's round.
double numpy_percent_mean_round2(const std::vector<double>& scores) {
  if (scores.empty()) return std::numeric_limits<double>::quiet_NaN();
  const double mean = numpy_pairwise_sum(scores.data(), scores.size()) / static_cast<double>(scores.size());
  return std::nearbyint((100 * mean) * 100) / 100;
}

// A list of strings; integers are taken as Python's str() of them (count_score compares
// str(ground_truth), so an answer written as 12 scores as "12").
std::vector<std::string> string_list(const nlohmann::json& value, const std::string& where,
                                     const std::string& key) {
  if (!value.is_array()) throw ConfigError(where, "$." + key, "expected a list of strings");
  std::vector<std::string> out;
  for (const auto& v : value) {
    if (v.is_string()) {
      out.push_back(v.get<std::string>());
    } else if (v.is_number_integer()) {
      out.push_back(v.dump());
    } else {
      throw ConfigError(where, "$." + key, "expected strings, got " + v.dump());
    }
  }
  return out;
}

double mean_of(const std::vector<double>& values) {
  double s = 0;
  for (double v : values) s += v;
  return s / static_cast<double>(values.size());
}

bool task_in_table(const LongBenchTask& task, const std::string& table) {
  if (table == "overall") return true;
  if (task.language == LongBenchLanguage::kCode) return true;
  return (table == "english") == (task.language == LongBenchLanguage::kEnglish);
}

// {category: mean, ..., "average": mean of categories} for one table of scores.
ordered_json summary_table(const std::map<std::string, double>& scores, const std::string& table) {
  ordered_json out = ordered_json::object();
  std::vector<double> category_means;
  for (const auto& category : longbench_categories()) {
    std::vector<double> values;
    for (const auto& [task_name, score] : scores) {
      const LongBenchTask* task = find_longbench_task(task_name);
      if (task->category == category.key && task_in_table(*task, table) && !std::isnan(score)) {
        values.push_back(score);
      }
    }
    if (values.empty()) continue;
    out[category.key] = mean_of(values);
    category_means.push_back(mean_of(values));
  }
  if (!category_means.empty()) out["average"] = mean_of(category_means);
  return out;
}

// A language table needs a task of its own language: code tasks alone (LongBench-E has
// no Chinese task) do not make a Chinese table.
bool has_language_task(const std::map<std::string, double>& scores, const std::string& table) {
  for (const auto& [task_name, score] : scores) {
    const LongBenchTask* task = find_longbench_task(task_name);
    if (task->language != LongBenchLanguage::kCode && task_in_table(*task, table) && !std::isnan(score)) return true;
  }
  return false;
}

ordered_json summary_of(const std::map<std::string, double>& scores) {
  ordered_json out = ordered_json::object();
  for (const char* table : {"english", "chinese", "overall"}) {
    if (std::string(table) != "overall" && !has_language_task(scores, table)) continue;
    ordered_json t = summary_table(scores, table);
    if (!t.empty()) out[table] = std::move(t);
  }
  return out;
}

}  // namespace

const JiebaSegmenter& LazyJieba::get() {
  if (!segmenter_) {
    const fs::path dir = locate_jieba_dir(explicit_dir_, flag_);
    segmenter_ = std::make_unique<JiebaSegmenter>(JiebaSegmenter::load(dir));
  }
  return *segmenter_;
}

std::vector<LongBenchPrediction> read_longbench_predictions(const fs::path& file, bool require_length) {
  std::vector<LongBenchPrediction> items;
  for_each_jsonl_line(file, read_input_file(file, ""), [&](const std::string& line, const std::string& where) {
    nlohmann::json j = parse_jsonl_line(line, where,
                                        "fix or delete that line (a prediction run that was cut off is resumed by "
                                        "`eval longbench`)",
                                        /*require_object=*/true);
    LongBenchPrediction item;
    if (!j.contains("pred") || !j["pred"].is_string()) throw ConfigError(where, "$.pred", "expected a string");
    item.pred = j["pred"].get<std::string>();
    if (!j.contains("answers")) throw ConfigError(where, "$.answers", "missing");
    item.answers = string_list(j["answers"], where, "answers");
    if (!j.contains("all_classes")) throw ConfigError(where, "$.all_classes", "missing", "write null when the task has none");
    if (!j["all_classes"].is_null()) item.all_classes = string_list(j["all_classes"], where, "all_classes");
    if (j.contains("length")) {
      if (!j["length"].is_number()) throw ConfigError(where, "$.length", "expected a number");
      item.length = j["length"].get<double>();
    } else if (require_length) {
      throw ConfigError(where, "$.length", "missing", "LongBench-E scores by length: keep the data's \"length\"");
    }
    items.push_back(std::move(item));
  });
  return items;
}

LongBenchTaskScore score_longbench_task(const std::string& task_name, const std::vector<LongBenchPrediction>& items,
                                        LazyJieba& jieba, const std::string& where) {
  const LongBenchTask* task = find_longbench_task(task_name);
  if (task == nullptr) throw ConfigError(where, "", "\"" + task_name + "\" is not a LongBench task");
  if (items.empty()) throw ConfigError(where, "", "has no predictions", "predict the task or remove the file");
  const JiebaSegmenter* segmenter = metric_needs_jieba(task->metric) ? &jieba.get() : nullptr;
  // eval.py keeps the all_classes of the last line it read, for every line.
  const std::vector<std::string>* all_classes = items.back().all_classes ? &*items.back().all_classes : nullptr;
  LongBenchTaskScore result;
  result.task = task_name;
  result.items = items.size();
  double total = 0.0;
  std::array<std::vector<double>, 3> bins;
  for (size_t i = 0; i < items.size(); ++i) {
    double s = 0;
    try {
      s = longbench_item_score(*task, items[i].pred, items[i].answers, all_classes, segmenter);
    } catch (const std::invalid_argument& e) {
      throw ConfigError(where, "line " + std::to_string(i + 1), e.what(), "fix the prediction file");
    }
    total += s;
    if (items[i].length) {
      const double length = *items[i].length;
      bins[length < 4000 ? 0 : length < 8000 ? 1 : 2].push_back(s);
    }
  }
  result.score = python_round(100 * total / static_cast<double>(items.size()), 2);
  for (size_t b = 0; b < 3; ++b) result.bins[b] = numpy_percent_mean_round2(bins[b]);
  return result;
}

LongBenchScoreReport score_longbench_dir(const fs::path& dir, bool longbench_e, LazyJieba& jieba) {
  if (!fs::is_directory(dir)) throw ConfigError(dir.string(), "", "is not a folder", "pass the prediction folder");
  std::map<std::string, fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 5 || name.compare(name.size() - 5, 5, "jsonl") != 0) continue;
    const std::string task = name.substr(0, name.find('.'));
    if (find_longbench_task(task) == nullptr) {
      throw ConfigError(entry.path().string(), "", "\"" + task + "\" is not a LongBench task",
                        "name prediction files <task>.jsonl, or move other .jsonl files out of the folder");
    }
    if (files.count(task)) {
      throw ConfigError(entry.path().string(), "", "a second prediction file for task \"" + task + "\" (" +
                                                       files[task].filename().string() + ")",
                        "keep one file per task");
    }
    files[task] = entry.path();
  }
  if (files.empty()) throw ConfigError(dir.string(), "", "has no <task>.jsonl prediction files");
  LongBenchScoreReport report;
  report.longbench_e = longbench_e;
  for (const auto& task : longbench_tasks()) {
    const auto it = files.find(task.name);
    if (it == files.end()) continue;
    const auto items = read_longbench_predictions(it->second, longbench_e);
    report.tasks.push_back(score_longbench_task(task.name, items, jieba, it->second.string()));
  }
  return report;
}

std::string longbench_result_json(const LongBenchScoreReport& report) {
  ordered_json result = ordered_json::object();
  for (const auto& t : report.tasks) {
    if (report.longbench_e) {
      ordered_json bins = ordered_json::object();
      for (size_t b = 0; b < 3; ++b) bins[kLongBenchEBins[b]] = t.bins[b];
      result[t.task] = std::move(bins);
    } else {
      result[t.task] = t.score;
    }
  }
  return python_json_dumps(result, 4);
}

ordered_json longbench_summary(const LongBenchScoreReport& report) {
  if (!report.longbench_e) {
    std::map<std::string, double> scores;
    for (const auto& t : report.tasks) scores[t.task] = t.score;
    return summary_of(scores);
  }
  ordered_json out = ordered_json::object();
  for (size_t b = 0; b < 3; ++b) {
    std::map<std::string, double> scores;
    for (const auto& t : report.tasks) scores[t.task] = t.bins[b];
    out[kLongBenchEBins[b]] = summary_of(scores);
  }
  return out;
}

std::string format_longbench_summary(const ordered_json& summary, bool longbench_e) {
  std::ostringstream out;
  auto table = [&](const ordered_json& s, const std::string& heading) {
    out << heading << "\n";
    out << std::left << std::setw(16) << "category";
    for (const char* t : {"english", "chinese", "overall"}) out << std::right << std::setw(10) << t;
    out << "\n";
    std::vector<std::pair<std::string, std::string>> rows;
    for (const auto& c : longbench_categories()) rows.emplace_back(c.key, c.title);
    rows.emplace_back("average", "Average");
    for (const auto& [key, title] : rows) {
      out << std::left << std::setw(16) << title;
      for (const char* t : {"english", "chinese", "overall"}) {
        std::ostringstream cell;
        if (s.contains(t) && s[t].contains(key)) {
          cell << std::fixed << std::setprecision(2) << s[t][key].get<double>();
        } else {
          cell << "-";
        }
        out << std::right << std::setw(10) << cell.str();
      }
      out << "\n";
    }
  };
  if (!longbench_e) {
    table(summary, "LongBench (category means of the task scores)");
  } else {
    for (const char* bin : kLongBenchEBins) {
      table(summary.contains(bin) ? summary[bin] : ordered_json::object(), std::string("LongBench-E, length ") + bin);
    }
  }
  return out.str();
}

ordered_json score_and_write_longbench(const fs::path& dir, bool longbench_e, LazyJieba& jieba) {
  const LongBenchScoreReport report = score_longbench_dir(dir, longbench_e, jieba);
  write_file_atomic(dir / "result.json", longbench_result_json(report));
  ordered_json summary = longbench_summary(report);
  write_file_atomic(dir / "summary.json", python_json_dumps(summary, 4) + "\n");
  return summary;
}

}  // namespace sb
