// RULER's question answering (scripts/data/synthetic/qa.py): a SQuAD v2 or HotpotQA
// question with its gold paragraphs among distractor documents from the same file.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "common/errors.h"
#include "harness/eval/ruler/python_random.h"
#include "harness/eval/ruler/ruler_generators.h"
#include "harness/eval/ruler/ruler_size_search.h"

namespace sb {
namespace {

struct QaItem {
  std::string query;
  std::vector<std::string> outputs;
  std::vector<size_t> context, more_context;  // document indices
};

struct QaData {
  std::vector<QaItem> items;
  std::vector<std::string> docs;  // sorted, distinct
};

nlohmann::json read_json(const std::filesystem::path& file, const std::string& flag) {
  if (file.empty()) throw ConfigError(flag, "", "is needed by the QA tasks", "pass the dataset's JSON file");
  std::ifstream in(file);
  if (!in) throw ConfigError(file.string(), "", "cannot be read", "check " + flag);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(file.string(), "", std::string("is not JSON: ") + e.what());
  }
}

std::map<std::string, size_t> index_docs(std::vector<std::string>& docs) {
  std::sort(docs.begin(), docs.end());
  docs.erase(std::unique(docs.begin(), docs.end()), docs.end());
  std::map<std::string, size_t> at;
  for (size_t i = 0; i < docs.size(); ++i) at[docs[i]] = i;
  return at;
}

// read_squad: answerable questions in file order; their paragraph, and the article's
// other paragraphs as the first distractors.
QaData read_squad(const std::filesystem::path& file) {
  const nlohmann::json data = read_json(file, "--squad");
  QaData out;
  try {
    for (const auto& article : data.at("data")) {
      for (const auto& p : article.at("paragraphs")) out.docs.push_back(p.at("context").get<std::string>());
    }
    const auto at = index_docs(out.docs);
    for (const auto& article : data.at("data")) {
      std::vector<size_t> article_docs;
      for (const auto& p : article.at("paragraphs")) article_docs.push_back(at.at(p.at("context").get<std::string>()));
      for (const auto& p : article.at("paragraphs")) {
        const size_t own = at.at(p.at("context").get<std::string>());
        for (const auto& qa : p.at("qas")) {
          if (qa.at("is_impossible").get<bool>()) continue;
          QaItem item;
          item.query = qa.at("question").get<std::string>();
          for (const auto& a : qa.at("answers")) item.outputs.push_back(a.at("text").get<std::string>());
          item.context = {own};
          for (size_t d : article_docs) {
            if (d != own) item.more_context.push_back(d);
          }
          out.items.push_back(std::move(item));
        }
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(file.string(), "", std::string("is not SQuAD v2.0's layout: ") + e.what(),
                      "give dev-v2.0.json as published");
  }
  return out;
}

// read_hotpotqa: every question in file order with its ten paragraphs ("title\n" + the
// sentences joined without a separator).
QaData read_hotpotqa(const std::filesystem::path& file) {
  const nlohmann::json data = read_json(file, "--hotpotqa");
  QaData out;
  const auto doc = [](const nlohmann::json& entry) {
    std::string text = entry.at(0).get<std::string>() + "\n";
    for (const auto& sentence : entry.at(1)) text += sentence.get<std::string>();
    return text;
  };
  try {
    for (const auto& item : data) {
      for (const auto& entry : item.at("context")) out.docs.push_back(doc(entry));
    }
    const auto at = index_docs(out.docs);
    for (const auto& item : data) {
      QaItem q;
      q.query = item.at("question").get<std::string>();
      q.outputs = {item.at("answer").get<std::string>()};
      for (const auto& entry : item.at("context")) q.context.push_back(at.at(doc(entry)));
      out.items.push_back(std::move(q));
    }
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(file.string(), "", std::string("is not HotpotQA's layout: ") + e.what(),
                      "give hotpot_dev_distractor_v1.json as published");
  }
  return out;
}

class QaGenerator {
 public:
  QaGenerator(const RulerTask& task, int64_t max_length, const RulerInputs& inputs)
      : task_(task), max_length_(max_length), inputs_(inputs), rng_(inputs.seed),
        data_(task.dataset == "squad" ? read_squad(inputs.squad) : read_hotpotqa(inputs.hotpotqa)) {
    template_ = ruler_full_template(RulerFamily::kQa);
  }

  RulerDraw generate(size_t index, int64_t num_docs) {
    const QaItem& item = data_.items.at(index);
    const auto n = static_cast<size_t>(num_docs);
    std::vector<std::string> docs;
    if (n < data_.docs.size()) {
      std::vector<size_t> chosen = item.context;
      if (num_docs - static_cast<int64_t>(item.context.size()) > static_cast<int64_t>(item.more_context.size())) {
        chosen.insert(chosen.end(), item.more_context.begin(), item.more_context.end());
        const std::set<size_t> taken(chosen.begin(), chosen.end());
        std::vector<size_t> others;
        for (size_t i = 0; i < data_.docs.size(); ++i) {
          if (taken.count(i) == 0) others.push_back(i);
        }
        const size_t extra = n - item.context.size() - item.more_context.size();
        if (extra > others.size()) throw RulerRetry("sample larger than population");
        for (size_t i : rng_.sample(others.size(), extra)) chosen.push_back(others[i]);
      } else {
        if (n < item.context.size()) throw RulerRetry("sample size is negative");
        for (size_t i : rng_.sample(item.more_context.size(), n - item.context.size())) {
          chosen.push_back(item.more_context[i]);
        }
      }
      for (size_t d : chosen) docs.push_back(data_.docs[d]);
    } else {
      for (size_t i = 0; i < n; ++i) docs.push_back(data_.docs[i % data_.docs.size()]);
    }
    PythonRandom(inputs_.seed).shuffle(docs);
    std::string context;
    for (size_t i = 0; i < docs.size(); ++i) {
      context += (i ? "\n\n" : "") + std::string("Document ") + std::to_string(i + 1) + ":\n" + docs[i];
    }
    return {format_ruler_template(template_, {{"context", context}, {"query", item.query}}), item.outputs, 0};
  }

  std::vector<RulerRecord> samples(int64_t num_samples) {
    if (data_.docs.empty()) {
      throw ConfigError(task_.dataset == "squad" ? "--squad" : "--hotpotqa", "", "has no documents",
                        "give the dataset's dev file as published");
    }
    if (static_cast<size_t>(num_samples) > data_.items.size()) {
      throw ConfigError(task_.dataset == "squad" ? "--squad" : "--hotpotqa", "",
                        "has " + std::to_string(data_.items.size()) + " answerable questions, fewer than the " +
                            std::to_string(num_samples) + " samples asked for",
                        "lower --samples");
    }
    const int64_t budget = ruler_template(RulerFamily::kQa).tokens_to_generate;
    const int64_t incremental = 10;
    const int64_t upper = ruler_search_upper(max_length_, inputs_.count_tokens(generate(0, incremental).prompt), incremental);
    const RulerSizing sizing{incremental, upper, max_length_, budget, 0, task_.name};
    std::vector<RulerRecord> records;
    for (RulerDraw& d : ruler_sized_samples(
             num_samples, sizing, inputs_.count_tokens, [&](int64_t n) { return generate(0, n).prompt; },
             [&](int64_t index, int64_t n) { return generate(static_cast<size_t>(index), n); })) {
      records.push_back(
          split_ruler_prompt(RulerFamily::kQa, d.prompt, static_cast<int64_t>(records.size()), d.outputs, d.length));
    }
    return records;
  }

 private:
  const RulerTask& task_;
  int64_t max_length_;
  const RulerInputs& inputs_;
  PythonRandom rng_;
  QaData data_;
  std::string template_;
};

}  // namespace

std::vector<RulerRecord> generate_qa(const RulerTask& task, int64_t max_length, int64_t num_samples, RulerInputs& inputs) {
  return QaGenerator(task, max_length, inputs).samples(num_samples);
}

}  // namespace sb
