#include "harness/eval/zeroshot/zeroshot_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/common/progress_eta.h"
#include "harness/common/system_info.h"
#include "harness/eval/eval_stamp.h"
#include "harness/eval/json_records.h"
#include "harness/eval/longbench/python_json.h"
#include "harness/eval/longbench/python_text.h"
#include "harness/eval/resumable_jsonl.h"
#include "harness/eval/zeroshot/continuation_loglikelihood.h"
#include "harness/eval/zeroshot/zeroshot_tasks.h"

namespace sb {

using nlohmann::ordered_json;
namespace fs = std::filesystem;

const char* const kZeroShotAverageRule = "mean over the tasks of acc_norm where the task reports it, else acc";

namespace {

fs::path task_file(const fs::path& data_dir, const ZeroShotTask& task) {
  for (const char* ext : {".jsonl", ".json"}) {
    const fs::path candidate = data_dir / (task.name + ext);
    if (fs::exists(candidate)) return candidate;
  }
  throw ConfigError((data_dir / (task.name + ".jsonl")).string(), "", "is missing",
                    "save the " + task.split + " split of " + task.dataset + " there (scripts/data/convert_zeroshot.py " +
                        task.name + " FILE.parquet " + data_dir.string() + " converts the published parquet file)");
}

// One scored document as lm-eval logs a sample (tuples as JSON arrays); scores[i] is
// the score of doc.requests[i].
ordered_json make_sample(const ZeroShotTask& task, const ZeroShotDoc& doc, const ordered_json& row, size_t doc_id,
                         const ContinuationScore* scores) {
  ordered_json arguments = ordered_json::array();
  for (const ZeroShotRequest& r : doc.requests) arguments.push_back(ordered_json::array({r.context, r.continuation}));
  std::vector<double> lls;
  ordered_json resps = ordered_json::array(), filtered = ordered_json::array(), tokens = ordered_json::array();
  for (size_t i = 0; i < doc.requests.size(); ++i) {
    lls.push_back(scores[i].loglikelihood);
    filtered.push_back(ordered_json::array({scores[i].loglikelihood, scores[i].is_greedy}));
    resps.push_back(ordered_json::array({filtered.back()}));
    tokens.push_back(scores[i].tokens);
  }
  ordered_json sample = ordered_json::object();
  sample["doc_id"] = doc_id;
  sample["doc"] = row;
  sample["target"] = doc.target;
  sample["arguments"] = arguments;
  sample["resps"] = resps;
  sample["filtered_resps"] = filtered;
  sample["filter"] = "none";
  sample["metrics"] = task.has_acc_norm ? ordered_json::array({"acc", "acc_norm"}) : ordered_json::array({"acc"});
  sample["acc"] = zeroshot_choice(lls) == static_cast<size_t>(doc.gold) ? 1.0 : 0.0;
  if (task.has_acc_norm) {
    sample["acc_norm"] = zeroshot_choice_normalized(lls, doc.choices) == static_cast<size_t>(doc.gold) ? 1.0 : 0.0;
  }
  sample["continuation_tokens"] = tokens;
  return sample;
}

// lm-eval's mean and mean_stderr (sample standard deviation / sqrt(n)).
void add_metric(ordered_json& result, const std::string& metric, const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v;
  const double n = static_cast<double>(values.size());
  const double mean = sum / n;
  result[metric + ",none"] = mean;
  if (values.size() < 2) {
    result[metric + "_stderr,none"] = "N/A";
    return;
  }
  double squares = 0;
  for (double v : values) squares += (v - mean) * (v - mean);
  result[metric + "_stderr,none"] = std::sqrt(squares / (n - 1)) / std::sqrt(n);
}

}  // namespace

size_t zeroshot_choice(const std::vector<double>& loglikelihoods) {
  size_t best = 0;  // np.argmax: the first index of the largest value
  for (size_t i = 1; i < loglikelihoods.size(); ++i) {
    if (loglikelihoods[i] > loglikelihoods[best]) best = i;
  }
  return best;
}

size_t zeroshot_choice_normalized(const std::vector<double>& loglikelihoods, const std::vector<std::string>& choices) {
  std::vector<double> normalized;
  for (size_t i = 0; i < loglikelihoods.size(); ++i) {
    normalized.push_back(loglikelihoods[i] / static_cast<double>(utf8_to_u32(choices.at(i), "a choice").size()));
  }
  return zeroshot_choice(normalized);
}

std::vector<std::string> zeroshot_task_names(const ZeroShotOptions& options) {
  if (!options.tasks.empty()) return options.tasks;
  std::vector<std::string> names;
  for (const ZeroShotTask& task : zeroshot_tasks()) names.push_back(task.name);
  return names;
}

ordered_json run_zeroshot(ModelFolder& model, const ZeroShotOptions& options, std::ostream& progress) {
  if (!model.tokenizer) throw ConfigError(model.dir.string(), "", "has no tokenizer.json", "zero-shot scoring needs it");
  if (options.limit < 0) throw ConfigError("--limit", "", "must be >= 0 (0: every document)");
  const int64_t max_length = model.model->config().max_position_embeddings;
  const std::vector<std::string> names = zeroshot_task_names(options);
  std::vector<const ZeroShotTask*> tasks;
  std::vector<fs::path> files;
  for (const std::string& name : names) {  // every name and file checked before any scoring
    const ZeroShotTask* task = &zeroshot_task(name, "--tasks");
    if (std::find(tasks.begin(), tasks.end(), task) != tasks.end()) {
      throw ConfigError("--tasks", "", "names " + name + " twice", "give each task once");
    }
    tasks.push_back(task);
    files.push_back(task_file(options.data_dir, *tasks.back()));
  }
  check_or_write_eval_stamp(options.out_dir / "model.json", eval_model_identity(model));
  ordered_json results = ordered_json::object(), group_subtasks = ordered_json::object(),
               configs = ordered_json::object(), versions = ordered_json::object(), n_shot = ordered_json::object(),
               higher = ordered_json::object(), n_samples = ordered_json::object();
  double average = 0, acc_average = 0;
  for (size_t t = 0; t < tasks.size(); ++t) {
    const ZeroShotTask& task = *tasks[t];
    std::vector<ordered_json> rows = read_json_records(files[t]);
    const size_t original = rows.size();
    if (options.limit > 0 && rows.size() > static_cast<size_t>(options.limit)) rows.resize(options.limit);
    if (rows.empty()) throw ConfigError(files[t].string(), "", "has no rows");
    ResumableJsonl samples(options.out_dir / ("samples_" + task.name + ".jsonl"));
    if (samples.existing().size() > rows.size()) {
      throw ConfigError(samples.path().string(), "", "has more samples than the " + std::to_string(rows.size()) +
                                                     " documents asked for", "use a fresh output folder or a larger --limit");
    }
    const auto where = [&](size_t i) { return files[t].string() + ":" + std::to_string(i + 1); };
    std::vector<ordered_json> scored = samples.existing();
    for (size_t i = 0; i < scored.size(); ++i) {
      if (scored[i].value("doc_id", size_t{0}) != i || !scored[i].contains("doc") || scored[i]["doc"] != rows[i]) {
        throw ConfigError(samples.path().string() + ":" + std::to_string(i + 1), "",
                          "scored another document than " + where(i), "use a fresh output folder for other data");
      }
    }
    const ProgressEta eta(static_cast<int64_t>(rows.size()), static_cast<int64_t>(scored.size()));
    // The rest in chunks: one document (its choices share a prefix cache), or with
    // batch_tokens as many documents as fill one packed batch.
    struct Encoded {
      ZeroShotDoc doc;
      std::vector<EncodedRequest> requests;
      int64_t tokens = 0;
    };
    const auto encode = [&](size_t i) {
      Encoded e{task.make_doc(rows[i], where(i)), {}, 0};
      try {
        for (const ZeroShotRequest& r : e.doc.requests) {
          e.requests.push_back(encode_request(*model.tokenizer, r.context, r.continuation));
          e.tokens += static_cast<int64_t>(e.requests.back().context.size() + e.requests.back().continuation.size());
        }
      } catch (const std::invalid_argument& error) {
        throw ConfigError(where(i), "", error.what());
      }
      return e;
    };
    std::optional<Encoded> next;  // encoded, but past the previous batch
    while (scored.size() < rows.size()) {
      std::vector<ZeroShotDoc> docs;
      std::vector<EncodedRequest> encoded;
      int64_t tokens = 0;
      for (size_t i = scored.size(); i < rows.size(); ++i) {
        Encoded e = next ? std::move(*next) : encode(i);
        next.reset();
        if (!docs.empty() && (options.batch_tokens <= 0 || tokens + e.tokens > options.batch_tokens)) {
          next = std::move(e);
          break;
        }
        tokens += e.tokens;
        docs.push_back(std::move(e.doc));
        encoded.insert(encoded.end(), e.requests.begin(), e.requests.end());
      }
      std::vector<ContinuationScore> scores;
      try {
        scores = options.batch_tokens > 0
                     ? score_continuations_packed(model.model, encoded, max_length, options.batch_tokens)
                     : score_continuations(model.model, encoded, max_length);
      } catch (const std::invalid_argument& e) {
        throw ConfigError(where(scored.size()), "", e.what());
      }
      size_t offset = 0;
      for (const ZeroShotDoc& doc : docs) {
        const size_t i = scored.size();
        scored.push_back(make_sample(task, doc, rows[i], i, scores.data() + offset));
        offset += doc.requests.size();
        samples.append(scored.back());
        if (eta.due(static_cast<int64_t>(i + 1))) {
          progress << "zeroshot " << task.name << ": " << eta.line(static_cast<int64_t>(i + 1)) << "\n";
        }
      }
    }
    std::vector<double> acc, acc_norm;
    for (const ordered_json& sample : scored) {
      acc.push_back(sample.at("acc").get<double>());
      if (task.has_acc_norm) acc_norm.push_back(sample.at("acc_norm").get<double>());
    }
    ordered_json r = ordered_json::object();
    r["name"] = task.name;
    r["alias"] = task.name;
    r["sample_len"] = rows.size();
    add_metric(r, "acc", acc);
    if (task.has_acc_norm) add_metric(r, "acc_norm", acc_norm);
    average += (task.has_acc_norm ? r["acc_norm,none"] : r["acc,none"]).get<double>();
    acc_average += r["acc,none"].get<double>();
    results[task.name] = r;
    group_subtasks[task.name] = ordered_json::array();
    ordered_json metric_list = ordered_json::array({{{"metric", "acc"}, {"aggregation", "mean"}, {"higher_is_better", true}}});
    higher[task.name] = {{"acc", true}};
    if (task.has_acc_norm) {
      metric_list.push_back({{"metric", "acc_norm"}, {"aggregation", "mean"}, {"higher_is_better", true}});
      higher[task.name]["acc_norm"] = true;
    }
    configs[task.name] = {{"task", task.name},
                          {"dataset_path", task.dataset},
                          {"data_file", fs::absolute(files[t]).string()},
                          {task.split + "_split", task.split},
                          {"target_delimiter", " "},
                          {"fewshot_delimiter", "\n\n"},
                          {"num_fewshot", 0},
                          {"metric_list", metric_list},
                          {"output_type", "multiple_choice"},
                          {"metadata", {{"version", task.version}}}};
    versions[task.name] = task.version;
    n_shot[task.name] = 0;
    n_samples[task.name] = {{"original", original}, {"effective", rows.size()}};
  }
  ordered_json out = ordered_json::object();
  out["results"] = results;
  out["group_subtasks"] = group_subtasks;
  out["configs"] = configs;
  out["versions"] = versions;
  out["n-shot"] = n_shot;
  out["higher_is_better"] = higher;
  out["n-samples"] = n_samples;
  out["config"] = {{"model", "sparsebalance"},
                   {"model_args", options.model_args},
                   {"limit", options.limit > 0 ? ordered_json(options.limit) : ordered_json(nullptr)},
                   {"bootstrap_iters", 0},
                   {"max_length", max_length},
                   {"batch_tokens", options.batch_tokens}};
  const double n = static_cast<double>(tasks.size());
  out["sparsebalance"] = {{"average", average / n},
                          {"average_rule", kZeroShotAverageRule},
                          {"acc_average", acc_average / n},
                          {"tasks", names},
                          {"context", ordered_json::parse(collect_system_info().dump())}};
  out["date"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  write_file_atomic(options.out_dir / "results.json", python_json_dumps(out, 2) + "\n");
  return out;
}

}  // namespace sb
