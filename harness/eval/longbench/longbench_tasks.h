#pragma once
// The 21 LongBench v1 tasks: metric, category, language and the per-task rules of
// upstream's pred.py and eval.py (first-line cut, no chat template, LongBench-E set).

#include <string>
#include <vector>

namespace sb {

class JiebaSegmenter;

enum class LongBenchMetric {
  kQaF1,
  kQaF1Zh,
  kRouge,
  kRougeZh,
  kClassification,
  kRetrieval,
  kRetrievalZh,
  kCount,
  kCodeSim,
};

// Language of a task for the English and Chinese tables; code tasks count in both.
enum class LongBenchLanguage { kEnglish, kChinese, kCode };

struct LongBenchTask {
  std::string name;
  LongBenchMetric metric;
  std::string category;  // key of longbench_categories()
  LongBenchLanguage language;
  bool first_line_only;  // trec, triviaqa, samsum, lsht: the scorer keeps the first line
  bool chat_template;    // false for trec, triviaqa, samsum, lsht, lcc, repobench-p
  bool in_longbench_e;   // one of the 13 LongBench-E tasks
};

// In upstream's order (pred.py's task list).
const std::vector<LongBenchTask>& longbench_tasks();
// nullptr when unknown.
const LongBenchTask* find_longbench_task(const std::string& name);
// The tasks upstream predicts: all 21, or the 13 of LongBench-E.
std::vector<std::string> longbench_task_names(bool longbench_e);

struct LongBenchCategory {
  std::string key;    // "single_doc_qa", ...
  std::string title;  // "Single-doc QA", ...
};
// The six categories in the paper's order.
const std::vector<LongBenchCategory>& longbench_categories();

bool metric_needs_jieba(LongBenchMetric metric);

// One item: max over the answers of the task's metric (after the first-line cut where
// the task has it), starting from 0 as upstream's scorer does. jieba may be null for
// tasks that do not need it. Throws std::invalid_argument for a retrieval answer
// without a paragraph id, and for a classification task without all_classes.
double longbench_item_score(const LongBenchTask& task, const std::string& prediction,
                            const std::vector<std::string>& answers,
                            const std::vector<std::string>* all_classes, const JiebaSegmenter* jieba);

}  // namespace sb
