#pragma once
// Scoring a prediction folder as upstream's eval.py does, plus the category tables.
//
// Input: PRED_DIR/<task>.jsonl, one JSON object per line with "pred", "answers",
// "all_classes" and (LongBench-E) "length"; the task is the file name up to its first
// ".", every file whose name ends in "jsonl" is read (as eval.py).
// result.json (written atomically, byte-identical to eval.py's json.dump(indent=4)):
//   v1: {task: round(100 * sum(item scores) / n, 2)}           Python's round
//   -E: {task: {"0-4k": s, "4-8k": s, "8k+": s}} with s = round(100 * np.mean(bin), 2),
//       where np.mean sums pairwise (numpy's float64 reduction) and numpy's round is
//       rint(x * 100) / 100; bins by "length" < 4000, < 8000, else; an empty bin is NaN.
// Upstream quirk kept: all_classes is the LAST line's, for every line of the file.
// Tasks appear in upstream's task order. Beyond upstream: summary.json (see
// longbench_summary) and a printed table.

#include <nlohmann/json.hpp>

#include <array>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/eval/longbench/jieba_segmenter.h"

namespace sb {

// Loads jieba on first use only (only the Chinese tasks need it).
class LazyJieba {
 public:
  explicit LazyJieba(std::string explicit_dir = "", std::string flag = "--jieba-dir")
      : explicit_dir_(std::move(explicit_dir)), flag_(std::move(flag)) {}
  const JiebaSegmenter& get();

 private:
  std::string explicit_dir_, flag_;
  std::unique_ptr<JiebaSegmenter> segmenter_;
};

struct LongBenchPrediction {
  std::string pred;
  std::vector<std::string> answers;
  std::optional<std::vector<std::string>> all_classes;  // null in the file -> empty optional
  std::optional<double> length;
};

// Reads one prediction file; ConfigError naming file:line for malformed lines. Blank
// lines are skipped. require_length: every line must have a numeric "length".
std::vector<LongBenchPrediction> read_longbench_predictions(const std::filesystem::path& file,
                                                            bool require_length);

inline constexpr std::array<const char*, 3> kLongBenchEBins = {"0-4k", "4-8k", "8k+"};

struct LongBenchTaskScore {
  std::string task;
  size_t items = 0;
  double score = 0;                 // v1
  std::array<double, 3> bins{};     // LongBench-E, NaN for an empty bin
};

// One task's scores (both forms), from its predictions; `where` names the file in errors.
LongBenchTaskScore score_longbench_task(const std::string& task, const std::vector<LongBenchPrediction>& items,
                                        LazyJieba& jieba, const std::string& where);

struct LongBenchScoreReport {
  bool longbench_e = false;
  std::vector<LongBenchTaskScore> tasks;  // upstream task order
};

// Scores every prediction file of dir. ConfigError when dir has none, or a file names
// an unknown task, or two files name the same task.
LongBenchScoreReport score_longbench_dir(const std::filesystem::path& dir, bool longbench_e, LazyJieba& jieba);

// The text eval.py writes to result.json.
std::string longbench_result_json(const LongBenchScoreReport& report);

// Category means, beyond upstream (docs/longbench.md, "LongBench tables"):
//   english / chinese: per category the mean of its tasks of that language (lcc and
//     repobench-p count in both), "average" the mean of the categories present;
//   overall: per category the mean of all its tasks, "average" the mean of those.
// Only categories with at least one task appear, and a language table only when it has a
// task of that language; -E: one such object per length bin.
nlohmann::ordered_json longbench_summary(const LongBenchScoreReport& report);

// The summary as a table for people.
std::string format_longbench_summary(const nlohmann::ordered_json& summary, bool longbench_e);

// Scores dir, writes result.json and summary.json (atomically), returns the summary.
nlohmann::ordered_json score_and_write_longbench(const std::filesystem::path& dir, bool longbench_e,
                                                 LazyJieba& jieba);

}  // namespace sb
