#pragma once
// RULER's scoring (scripts/eval/evaluate.py, scripts/eval/synthetic/constants.py): the
// prediction cleaned (strip; control characters to "\n"; strip), each reference
// looked for case-insensitively inside it; string_match_all (the share of references
// found) for every family but QA, string_match_part (any reference found) for QA; the
// task's score is 100 x the mean, rounded to 2 decimals; "Nulls" counts empty
// predictions. summary.csv is the table evaluate.py writes with pandas.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "harness/eval/ruler/ruler_tasks.h"

namespace sb {

std::string ruler_postprocess(const std::string& prediction);
double ruler_string_match_all(const std::vector<std::string>& predictions,
                              const std::vector<std::vector<std::string>>& references);
double ruler_string_match_part(const std::vector<std::string>& predictions,
                               const std::vector<std::vector<std::string>>& references);

struct RulerTaskScore {
  std::string task;
  double score = 0;   // percent, rounded to 2 decimals
  std::string nulls;  // "<empty predictions>/<predictions>"
};

// One task's prediction lines ({"pred", "outputs", ...}); ConfigError naming `where`.
RulerTaskScore score_ruler_task(const RulerTask& task, const std::vector<nlohmann::ordered_json>& lines,
                                const std::string& where);

// "0,1,..,T\nTasks,..\nScore,..\nNulls,..\n" as pandas' to_csv(index=False) writes evaluate.py's table.
std::string ruler_summary_csv(const std::vector<RulerTaskScore>& scores);

// evaluate.py on a prediction folder: every <task>.jsonl of a known task, in RULER's
// order, scored; writes summary.csv (summary-<task>.csv for a single task) there and
// returns the scores. ConfigError when the folder has no prediction file.
std::vector<RulerTaskScore> score_ruler_prediction_dir(const std::filesystem::path& dir);

}  // namespace sb
