#include "harness/eval/longbench/longbench_tasks.h"

#include <algorithm>
#include <stdexcept>

#include "harness/eval/longbench/longbench_metrics.h"

namespace sb {

const std::vector<LongBenchTask>& longbench_tasks() {
  using M = LongBenchMetric;
  using L = LongBenchLanguage;
  static const std::vector<LongBenchTask> kTasks = {
      {"narrativeqa", M::kQaF1, "single_doc_qa", L::kEnglish, false, true, false},
      {"qasper", M::kQaF1, "single_doc_qa", L::kEnglish, false, true, true},
      {"multifieldqa_en", M::kQaF1, "single_doc_qa", L::kEnglish, false, true, true},
      {"multifieldqa_zh", M::kQaF1Zh, "single_doc_qa", L::kChinese, false, true, false},
      {"hotpotqa", M::kQaF1, "multi_doc_qa", L::kEnglish, false, true, true},
      {"2wikimqa", M::kQaF1, "multi_doc_qa", L::kEnglish, false, true, true},
      {"musique", M::kQaF1, "multi_doc_qa", L::kEnglish, false, true, false},
      {"dureader", M::kRougeZh, "multi_doc_qa", L::kChinese, false, true, false},
      {"gov_report", M::kRouge, "summarization", L::kEnglish, false, true, true},
      {"qmsum", M::kRouge, "summarization", L::kEnglish, false, true, false},
      {"multi_news", M::kRouge, "summarization", L::kEnglish, false, true, true},
      {"vcsum", M::kRougeZh, "summarization", L::kChinese, false, true, false},
      {"trec", M::kClassification, "few_shot", L::kEnglish, true, false, true},
      {"triviaqa", M::kQaF1, "few_shot", L::kEnglish, true, false, true},
      {"samsum", M::kRouge, "few_shot", L::kEnglish, true, false, true},
      {"lsht", M::kClassification, "few_shot", L::kChinese, true, false, false},
      {"passage_count", M::kCount, "synthetic", L::kEnglish, false, true, true},
      {"passage_retrieval_en", M::kRetrieval, "synthetic", L::kEnglish, false, true, true},
      {"passage_retrieval_zh", M::kRetrievalZh, "synthetic", L::kChinese, false, true, false},
      {"lcc", M::kCodeSim, "code", L::kCode, false, false, true},
      {"repobench-p", M::kCodeSim, "code", L::kCode, false, false, true},
  };
  return kTasks;
}

const LongBenchTask* find_longbench_task(const std::string& name) {
  for (const auto& task : longbench_tasks()) {
    if (task.name == name) return &task;
  }
  return nullptr;
}

std::vector<std::string> longbench_task_names(bool longbench_e) {
  std::vector<std::string> names;
  for (const auto& task : longbench_tasks()) {
    if (!longbench_e || task.in_longbench_e) names.push_back(task.name);
  }
  return names;
}

const std::vector<LongBenchCategory>& longbench_categories() {
  static const std::vector<LongBenchCategory> kCategories = {
      {"single_doc_qa", "Single-doc QA"}, {"multi_doc_qa", "Multi-doc QA"},
      {"summarization", "Summarization"}, {"few_shot", "Few-shot"},
      {"synthetic", "Synthetic"},         {"code", "Code"},
  };
  return kCategories;
}

bool metric_needs_jieba(LongBenchMetric metric) {
  return metric == LongBenchMetric::kQaF1Zh || metric == LongBenchMetric::kRougeZh;
}

double longbench_item_score(const LongBenchTask& task, const std::string& prediction,
                            const std::vector<std::string>& answers,
                            const std::vector<std::string>* all_classes, const JiebaSegmenter* jieba) {
  const std::string pred = task.first_line_only ? first_line_of_prediction(prediction) : prediction;
  if (metric_needs_jieba(task.metric) && jieba == nullptr) {
    throw std::logic_error("longbench_item_score: " + task.name + " needs the jieba segmenter");
  }
  double best = 0.0;
  for (const std::string& truth : answers) {
    double s = 0.0;
    switch (task.metric) {
      case LongBenchMetric::kQaF1: s = qa_f1_score(pred, truth); break;
      case LongBenchMetric::kQaF1Zh: s = qa_f1_zh_score(pred, truth, *jieba); break;
      case LongBenchMetric::kRouge: s = rouge_score(pred, truth); break;
      case LongBenchMetric::kRougeZh: s = rouge_zh_score(pred, truth, *jieba); break;
      case LongBenchMetric::kClassification:
        if (all_classes == nullptr) {
          throw std::invalid_argument(task.name + " is scored by classification and needs all_classes");
        }
        s = classification_score(pred, truth, *all_classes);
        break;
      case LongBenchMetric::kRetrieval: s = retrieval_score(pred, truth); break;
      case LongBenchMetric::kRetrievalZh: s = retrieval_zh_score(pred, truth); break;
      case LongBenchMetric::kCount: s = count_score(pred, truth); break;
      case LongBenchMetric::kCodeSim: s = code_sim_score(pred, truth); break;
      default: throw std::logic_error("longbench_item_score: unknown metric");
    }
    best = std::max(best, s);
  }
  return best;
}

}  // namespace sb
