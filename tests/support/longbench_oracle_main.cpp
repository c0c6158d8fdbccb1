// sb_longbench_oracle: the C++ LongBench building blocks behind one JSON-lines door, so
// that tests/python can compare them with the upstream Python packages (jieba, rouge,
// fuzzywuzzy, numpy) on large inputs in one process. One request per stdin line, one
// answer per stdout line:
//   {"op": "jieba", "text": T, "jieba_dir": D}        -> {"words": [...]}
//   {"op": "metric", "metric": M, "pred": P, "truth": T, "all_classes": [...] | null,
//    "jieba_dir": D}                                   -> {"score": x}
//        M: qa_f1 qa_f1_zh rouge rouge_zh classification retrieval retrieval_zh count
//           code_sim fuzz_ratio normalize normalize_zh first_line (the last three: "text")
//   {"op": "item", "task": T, "pred": P, "answers": [...], "all_classes": ...} -> {"score": x}
//   {"op": "lower", "text": T}                        -> {"text": lower(T)}
//   {"op": "classes", "from": a, "to": b}             -> {"space": [...], "word": [...], "decimal": [...]}
//        (the code points in [a, b) with each property)
//   {"op": "repr", "values": [...]}                   -> {"repr": [...], "round2": [...]}
//   {"op": "dumps", "value": V, "indent": i}          -> {"text": python_json_dumps(V, i)}
//   {"op": "task_score", "task": T, "items": [{pred, answers, all_classes, length}]}
//                                                     -> {"score": s, "bins": [...]}
//   {"op": "longbench_prompt", "tokenizer": tokenizer.json, "task": T, "template": S, "item": {...},
//    "max_length": n, "chat": bool, "system_prompt": S | null}      -> {"ids": [...], "truncated": b}
//   {"op": "v2_prompt", same keys without task}                      -> {"ids": [...]}
//   {"op": "v2_extract", "text": T}                                   -> {"answer": "A".."D" | null}
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/eval/longbench/jieba_segmenter.h"
#include "harness/eval/longbench/longbench_metrics.h"
#include "harness/eval/longbench/longbench_predict.h"
#include "harness/eval/longbench/longbench_scorer.h"
#include "harness/eval/longbench/longbench_tasks.h"
#include "harness/eval/longbench/longbench_v2.h"
#include "harness/eval/longbench/python_json.h"
#include "harness/eval/longbench/python_text.h"

namespace {

using json = nlohmann::ordered_json;

std::map<std::string, std::unique_ptr<sb::LazyJieba>> g_jieba;

sb::LazyJieba& jieba_for(const json& request) {
  const std::string dir = request.value("jieba_dir", "");
  auto& slot = g_jieba[dir];
  if (!slot) slot = std::make_unique<sb::LazyJieba>(dir);
  return *slot;
}

std::map<std::string, std::unique_ptr<sb::Tokenizer>> g_tokenizers;

const sb::Tokenizer& tokenizer_for(const json& request) {
  const std::string path = request.at("tokenizer");
  auto& slot = g_tokenizers[path];
  if (!slot) slot = std::make_unique<sb::Tokenizer>(sb::Tokenizer::from_file(path));
  return *slot;
}

sb::ChatStyle chat_of(const json& request) {
  sb::ChatStyle style;
  style.chat = request.at("chat").get<bool>();
  if (request.at("system_prompt").is_null()) {
    style.system_prompt.reset();
  } else {
    style.system_prompt = request["system_prompt"].get<std::string>();
  }
  return style;
}

std::vector<std::string> strings(const json& j) {
  std::vector<std::string> out;
  for (const auto& v : j) out.push_back(v.get<std::string>());
  return out;
}

double metric(const json& r) {
  const std::string m = r.at("metric");
  const std::string pred = r.value("pred", "");
  const std::string truth = r.value("truth", "");
  if (m == "qa_f1") return sb::qa_f1_score(pred, truth);
  if (m == "qa_f1_zh") return sb::qa_f1_zh_score(pred, truth, jieba_for(r).get());
  if (m == "rouge") return sb::rouge_score(pred, truth);
  if (m == "rouge_zh") return sb::rouge_zh_score(pred, truth, jieba_for(r).get());
  if (m == "classification") return sb::classification_score(pred, truth, strings(r.at("all_classes")));
  if (m == "retrieval") return sb::retrieval_score(pred, truth);
  if (m == "retrieval_zh") return sb::retrieval_zh_score(pred, truth);
  if (m == "count") return sb::count_score(pred, truth);
  if (m == "code_sim") return sb::code_sim_score(pred, truth);
  if (m == "fuzz_ratio") return sb::fuzz_ratio(pred, truth);
  throw std::invalid_argument("unknown metric " + m);
}

json answer(const json& r) {
  const std::string op = r.at("op");
  if (op == "jieba") return {{"words", jieba_for(r).get().cut_utf8(r.at("text").get<std::string>())}};
  if (op == "metric") {
    const std::string m = r.at("metric");
    const std::u32string text = sb::utf8_to_u32(r.value("text", ""));
    if (m == "normalize") return {{"text", sb::u32_to_utf8(sb::longbench_normalize_answer(text))}};
    if (m == "normalize_zh") return {{"text", sb::u32_to_utf8(sb::longbench_normalize_zh_answer(text))}};
    if (m == "first_line") return {{"text", sb::first_line_of_prediction(r.value("text", ""))}};
    return {{"score", metric(r)}};
  }
  if (op == "item") {
    const sb::LongBenchTask* task = sb::find_longbench_task(r.at("task"));
    if (task == nullptr) throw std::invalid_argument("unknown task");
    std::vector<std::string> classes;
    const bool has_classes = r.contains("all_classes") && !r["all_classes"].is_null();
    if (has_classes) classes = strings(r["all_classes"]);
    const sb::JiebaSegmenter* seg = sb::metric_needs_jieba(task->metric) ? &jieba_for(r).get() : nullptr;
    return {{"score", sb::longbench_item_score(*task, r.at("pred"), strings(r.at("answers")),
                                               has_classes ? &classes : nullptr, seg)}};
  }
  if (op == "lower") {
    return {{"text", sb::u32_to_utf8(sb::python_lower(sb::utf8_to_u32(r.at("text").get<std::string>())))}};
  }
  if (op == "classes") {
    json space = json::array(), word = json::array(), decimal = json::array();
    for (char32_t c = r.at("from").get<char32_t>(); c < r.at("to").get<char32_t>(); ++c) {
      if (sb::is_python_space(c)) space.push_back(c);
      if (sb::is_python_word(c)) word.push_back(c);
      if (sb::is_python_decimal(c)) decimal.push_back(c);
    }
    return {{"space", space}, {"word", word}, {"decimal", decimal}};
  }
  if (op == "repr") {
    json reprs = json::array(), rounded = json::array();
    for (const auto& v : r.at("values")) {
      reprs.push_back(sb::python_float_repr(v.get<double>()));
      rounded.push_back(sb::python_round(v.get<double>(), 2));
    }
    return {{"repr", reprs}, {"round2", rounded}};
  }
  if (op == "dumps") {
    return {{"text", sb::python_json_dumps(r.at("value"), r.value("indent", -1))}};
  }
  if (op == "task_score") {
    std::vector<sb::LongBenchPrediction> items;
    for (const auto& it : r.at("items")) {
      sb::LongBenchPrediction p;
      p.pred = it.at("pred");
      p.answers = strings(it.at("answers"));
      if (!it.at("all_classes").is_null()) p.all_classes = strings(it["all_classes"]);
      if (it.contains("length")) p.length = it["length"].get<double>();
      items.push_back(std::move(p));
    }
    const auto s = sb::score_longbench_task(r.at("task"), items, jieba_for(r), "request");
    return {{"score", s.score}, {"bins", s.bins}};
  }
  if (op == "longbench_prompt") {
    bool truncated = false;
    const auto ids = sb::longbench_prompt_ids(tokenizer_for(r), r.at("task"), r.at("template"), r.at("item"),
                                              r.at("max_length"), chat_of(r), "request", &truncated);
    return {{"ids", ids}, {"truncated", truncated}};
  }
  if (op == "v2_prompt") {
    const sb::Tokenizer& tok = tokenizer_for(r);
    const std::string prompt = sb::truncate_middle_v2(tok, sb::longbench_v2_prompt(r.at("template"), r.at("item"), "request"),
                                                      r.at("max_length"));
    return {{"ids", tok.encode(sb::apply_chat_style(prompt, chat_of(r)))}};
  }
  if (op == "v2_extract") {
    const auto answer = sb::longbench_v2_extract_answer(r.at("text"));
    return {{"answer", answer ? json(*answer) : json(nullptr)}};
  }
  throw std::invalid_argument("unknown op " + op);
}

}  // namespace

int main() {
  std::ios::sync_with_stdio(false);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    json out;
    try {
      out = answer(json::parse(line));
    } catch (const std::exception& e) {
      out = {{"error", e.what()}};
    }
    // NaN is not JSON; Python's json reads the "NaN" that python_json_dumps writes.
    std::cout << sb::python_json_dumps(out) << "\n";
    std::cout.flush();
  }
  return 0;
}
