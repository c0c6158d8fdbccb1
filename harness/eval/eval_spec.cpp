#include "harness/eval/eval_spec.h"

#include <algorithm>

#include "harness/common/json_object_reader.h"
#include "harness/eval/longbench/longbench_tasks.h"
#include "harness/eval/ruler/ruler_tasks.h"
#include "harness/eval/zeroshot/zeroshot_tasks.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path resolve(const fs::path& base_dir, const std::string& path) {
  const fs::path p(path);
  return p.is_absolute() ? p : base_dir / p;
}

template <typename T>
std::vector<T> read_number_list(JsonObjectReader& r, const std::string& key, const std::vector<T>& fallback) {
  const json* value = r.optional_value(key);
  if (value == nullptr) return fallback;
  const json& list = expect_json_array(*value, r.child_path(key), r.file());
  std::vector<T> out;
  for (size_t i = 0; i < list.size(); ++i) {
    out.push_back(r.convert<T>(list[i], r.child_path(key) + "[" + std::to_string(i) + "]"));
  }
  r.expect(!out.empty(), key, "is empty", "give at least one value");
  return out;
}

int64_t read_limit(JsonObjectReader& r) {
  const int64_t limit = r.optional<int64_t>("limit", 0);
  r.expect(limit >= 0, "limit", "must be >= 0", "0 means every item");
  return limit;
}

int64_t read_max_length(JsonObjectReader& r, int64_t fallback) {
  const int64_t n = r.optional<int64_t>("max_length", fallback);
  r.expect(n >= 2, "max_length", "must be >= 2", "give the prompt budget in tokens");
  return n;
}

LongBenchPredictOptions parse_longbench(const json& j, const std::string& path, const std::string& file,
                                        const fs::path& base_dir) {
  JsonObjectReader r(j, path, file);
  LongBenchPredictOptions o;
  o.data_dir = resolve(base_dir, r.required<std::string>("data"));
  o.config_dir = resolve(base_dir, r.required<std::string>("config"));
  o.longbench_e = r.optional<bool>("longbench_e", false);
  if (const json* tasks = r.optional_value("tasks")) {
    const json& list = expect_json_array(*tasks, r.child_path("tasks"), file);
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string where = r.child_path("tasks") + "[" + std::to_string(i) + "]";
      const std::string task = r.convert<std::string>(list[i], where);
      const LongBenchTask* known = find_longbench_task(task);
      if (known == nullptr) throw ConfigError(file, where, "unknown LongBench task \"" + task + "\"");
      if (o.longbench_e && !known->in_longbench_e) {
        throw ConfigError(file, where, "\"" + task + "\" is not a LongBench-E task", "remove it or set longbench_e false");
      }
      o.tasks.push_back(task);
    }
  } else {
    o.tasks = longbench_task_names(o.longbench_e);
  }
  o.max_length = read_max_length(r, o.max_length);
  o.limit = read_limit(r);
  r.finish();
  return o;
}

LongBenchV2Options parse_longbench_v2(const json& j, const std::string& path, const std::string& file,
                                      const fs::path& base_dir) {
  JsonObjectReader r(j, path, file);
  LongBenchV2Options o;
  o.data_file = resolve(base_dir, r.required<std::string>("data"));
  o.config_dir = resolve(base_dir, r.required<std::string>("config"));
  o.max_length = read_max_length(r, o.max_length);
  o.max_new_tokens = r.optional<int64_t>("max_new_tokens", o.max_new_tokens);
  r.expect(o.max_new_tokens >= 1, "max_new_tokens", "must be >= 1", "upstream uses 128");
  o.limit = read_limit(r);
  r.finish();
  return o;
}

NiahOptions parse_niah(const json& j, const std::string& path, const std::string& file, const fs::path& base_dir) {
  JsonObjectReader r(j, path, file);
  NiahOptions o;
  const std::string haystack = r.optional<std::string>("haystack", o.haystack);
  o.haystack = haystack == "synthetic" ? haystack : resolve(base_dir, haystack).string();
  o.lengths = read_number_list<int64_t>(r, "lengths", o.lengths);
  for (int64_t l : o.lengths) r.expect(l >= 16, "lengths", "lengths must be >= 16 tokens", "give context lengths in tokens");
  o.depths = read_number_list<double>(r, "depths", o.depths);
  for (double d : o.depths) r.expect(d >= 0 && d <= 100, "depths", "depths must be in [0, 100]", "give percentages");
  o.samples = r.optional<int64_t>("samples", o.samples);
  r.expect(o.samples >= 1, "samples", "must be >= 1", "one needle per cell at least");
  o.max_new_tokens = r.optional<int64_t>("max_new_tokens", o.max_new_tokens);
  r.expect(o.max_new_tokens >= 1, "max_new_tokens", "must be >= 1", "the answer needs tokens");
  const int64_t seed = r.optional<int64_t>("seed", static_cast<int64_t>(o.seed));
  r.expect(seed >= 0, "seed", "must be >= 0", "give a non-negative seed");
  o.seed = static_cast<uint64_t>(seed);
  r.finish();
  return o;
}

HeldoutOptions parse_heldout(const json& j, const std::string& path, const std::string& file,
                             const fs::path& base_dir) {
  JsonObjectReader r(j, path, file);
  HeldoutOptions o;
  o.data = resolve(base_dir, r.required<std::string>("data"));
  o.window = read_max_length(r, o.window);
  o.limit = read_limit(r);
  o.stride = r.optional<int64_t>("stride", o.stride);
  r.expect(o.stride == 0 || (o.stride >= 1 && o.stride < o.window), "stride",
           "must be 0 (disjoint windows) or in [1, max_length) (sliding windows), got " + std::to_string(o.stride),
           "use a stride below the window, e.g. half of it");
  o.bucket_tokens = r.optional<int64_t>("bucket_tokens", o.bucket_tokens);
  r.expect(o.bucket_tokens >= 0, "bucket_tokens", "must be >= 0 (0: no position buckets)",
           "give the width of a position bucket in tokens, e.g. 1024");
  r.finish();
  return o;
}

// An optional list of task names under `key`, each checked by `lookup` (which throws a
// ConfigError for an unknown name); empty when the key is absent.
template <typename Lookup>
std::vector<std::string> read_task_names(JsonObjectReader& r, const std::string& key, const std::string& file,
                                         Lookup lookup) {
  std::vector<std::string> names;
  const json* tasks = r.optional_value(key);
  if (tasks == nullptr) return names;
  const json& list = expect_json_array(*tasks, r.child_path(key), file);
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = r.child_path(key) + "[" + std::to_string(i) + "]";
    const std::string name = r.convert<std::string>(list[i], where);
    try {
      names.push_back(lookup(name, where).name);
    } catch (const ConfigError& e) {
      throw ConfigError(file, where, e.problem(), e.fix());
    }
    if (std::count(names.begin(), names.end(), name) > 1) {
      throw ConfigError(file, where, "names " + name + " twice", "give each task once");
    }
  }
  r.expect(!names.empty(), key, "is empty", "leave it out for every task");
  return names;
}

ZeroShotOptions parse_zeroshot(const json& j, const std::string& path, const std::string& file,
                               const fs::path& base_dir) {
  JsonObjectReader r(j, path, file);
  ZeroShotOptions o;
  o.data_dir = resolve(base_dir, r.required<std::string>("data"));
  o.tasks = read_task_names(r, "tasks", file, zeroshot_task);
  o.batch_tokens = r.optional<int64_t>("batch_tokens", 0);
  r.expect(o.batch_tokens >= 0, "batch_tokens", "must be >= 0", "0 scores one document at a time");
  o.tasks = zeroshot_task_names(o);
  o.limit = read_limit(r);
  r.finish();
  return o;
}

RulerOptions parse_ruler(const json& j, const std::string& path, const std::string& file, const fs::path& base_dir) {
  JsonObjectReader r(j, path, file);
  RulerOptions o;
  o.lengths = read_number_list<int64_t>(r, "lengths", o.lengths);
  for (int64_t l : o.lengths) r.expect(l >= 256, "lengths", "lengths must be >= 256 tokens", "give sequence lengths in tokens");
  o.samples = r.optional<int64_t>("samples", o.samples);
  r.expect(o.samples >= 1, "samples", "must be >= 1", "RULER uses 500");
  o.tasks = read_task_names(r, "tasks", file, ruler_task);
  const std::string haystack = r.optional<std::string>("haystack", o.haystack);
  o.haystack = haystack == "synthetic" ? haystack : resolve(base_dir, haystack).string();
  if (r.has("squad")) o.squad = resolve(base_dir, r.required<std::string>("squad"));
  if (r.has("hotpotqa")) o.hotpotqa = resolve(base_dir, r.required<std::string>("hotpotqa"));
  if (r.has("cwe_words")) o.cwe_words = resolve(base_dir, r.required<std::string>("cwe_words"));
  if (r.has("words_dir")) o.words_dir = resolve(base_dir, r.required<std::string>("words_dir")).string();
  const int64_t seed = r.optional<int64_t>("seed", static_cast<int64_t>(o.seed));
  r.expect(seed >= 0 && seed <= 0xFFFFFFFFll, "seed", "must be in [0, 2^32) (numpy's seed range)", "RULER uses 42");
  o.seed = static_cast<uint64_t>(seed);
  r.finish();
  for (const std::string& name : o.tasks) {
    const RulerTask& task = ruler_task(name, path);
    if ((task.dataset == "squad" && o.squad.empty()) || (task.dataset == "hotpotqa" && o.hotpotqa.empty())) {
      throw ConfigError(file, path + ".tasks", name + " needs its data file", "add \"" + task.dataset + "\": FILE");
    }
  }
  o.tasks = ruler_task_names(o);
  return o;
}

// "samples" of a held-out section: at least one.
int64_t read_samples(JsonObjectReader& r, int64_t fallback, const std::string& verb) {
  const int64_t samples = r.optional<int64_t>("samples", fallback);
  r.expect(samples >= 1, "samples", "must be >= 1", "give the number of held-out samples to " + verb);
  return samples;
}

SyntheticHeldoutOptions parse_synthetic(const json& j, const std::string& path, const std::string& file) {
  JsonObjectReader r(j, path, file);
  SyntheticHeldoutOptions o;
  o.samples = read_samples(r, o.samples, "score");
  o.dense_reference = r.optional<bool>("dense_reference", o.dense_reference);
  r.finish();
  return o;
}

RoutingCoverageOptions parse_coverage(const json& j, const std::string& path, const std::string& file) {
  JsonObjectReader r(j, path, file);
  RoutingCoverageOptions o;
  o.samples = read_samples(r, o.samples, "route");
  o.block_size = r.optional<int64_t>("block_size", o.block_size);
  r.expect(o.block_size >= 0, "block_size", "must be >= 1 (0: the run's MoBA block size)", "give MoBA's block size");
  o.top_k = r.optional<int64_t>("top_k", o.top_k);
  r.expect(o.top_k >= 0, "top_k", "must be >= 1 (0: the run's MoBA top_k)", "give the budget k0 the floors refer to");
  if (r.optional_value("gate") != nullptr) o.gate = r.optional_choice("gate", "block", {"block", "token"});
  o.k_max = r.optional<int64_t>("k_max", o.k_max);
  r.expect(o.k_max >= 0, "k_max", "must be >= 0 (0: every eligible block)", "give the curve's length");
  o.p = read_number_list<double>(r, "p", o.p);
  for (double p : o.p) r.expect(p >= 0.0 && p < 1.0, "p", "holds " + std::to_string(p) + ", outside [0, 1)", "use thresholds like 0.1");
  o.before = r.optional<bool>("before", o.before);
  r.finish();
  return o;
}

}  // namespace

EvalSpec parse_eval_spec(const json& value, const std::string& path, const std::string& file, const fs::path& base_dir) {
  JsonObjectReader r(value, path, file);
  EvalSpec spec;
  spec.chat.chat = r.optional<bool>("chat", true);
  if (const json* system = r.optional_value("system_prompt")) {
    if (system->is_null()) {
      spec.chat.system_prompt.reset();
    } else {
      spec.chat.system_prompt = r.convert<std::string>(*system, r.child_path("system_prompt"));
    }
  }
  spec.repetition_penalty = r.optional<double>("repetition_penalty", 1.0);
  r.expect(spec.repetition_penalty > 0, "repetition_penalty", "must be > 0", "1 turns it off");
  if (r.has("jieba_dir")) spec.jieba_dir = resolve(base_dir, r.required<std::string>("jieba_dir")).string();
  if (const json* j = r.optional_value("longbench")) {
    spec.longbench = parse_longbench(*j, r.child_path("longbench"), file, base_dir);
  }
  if (const json* j = r.optional_value("longbench_v2")) {
    spec.longbench_v2 = parse_longbench_v2(*j, r.child_path("longbench_v2"), file, base_dir);
  }
  if (const json* j = r.optional_value("niah")) spec.niah = parse_niah(*j, r.child_path("niah"), file, base_dir);
  if (const json* j = r.optional_value("heldout")) spec.heldout = parse_heldout(*j, r.child_path("heldout"), file, base_dir);
  if (const json* j = r.optional_value("ruler")) spec.ruler = parse_ruler(*j, r.child_path("ruler"), file, base_dir);
  if (const json* j = r.optional_value("zeroshot")) {
    spec.zeroshot = parse_zeroshot(*j, r.child_path("zeroshot"), file, base_dir);
  }
  if (const json* j = r.optional_value("synthetic")) spec.synthetic = parse_synthetic(*j, r.child_path("synthetic"), file);
  if (const json* j = r.optional_value("coverage")) spec.coverage = parse_coverage(*j, r.child_path("coverage"), file);
  r.finish();
  if (!spec.longbench && !spec.longbench_v2 && !spec.niah && !spec.heldout && !spec.zeroshot && !spec.ruler &&
      !spec.synthetic && !spec.coverage) {
    throw ConfigError(file, path, "has nothing to evaluate",
                      "add one of \"longbench\", \"longbench_v2\", \"niah\", \"heldout\", \"zeroshot\", \"ruler\", "
                      "\"synthetic\", \"coverage\", or "
                      "remove the block");
  }
  return spec;
}

json eval_spec_to_json(const EvalSpec& spec) {
  json j;
  j["chat"] = spec.chat.chat;
  j["system_prompt"] = spec.chat.system_prompt ? json(*spec.chat.system_prompt) : json(nullptr);
  if (!spec.jieba_dir.empty()) j["jieba_dir"] = spec.jieba_dir;
  j["repetition_penalty"] = spec.repetition_penalty;
  if (const auto& o = spec.longbench) {
    j["longbench"] = {{"data", o->data_dir.string()}, {"config", o->config_dir.string()}, {"tasks", o->tasks},
                      {"longbench_e", o->longbench_e}, {"max_length", o->max_length}, {"limit", o->limit}};
  }
  if (const auto& o = spec.longbench_v2) {
    j["longbench_v2"] = {{"data", o->data_file.string()}, {"config", o->config_dir.string()},
                         {"max_length", o->max_length}, {"max_new_tokens", o->max_new_tokens}, {"limit", o->limit}};
  }
  if (const auto& o = spec.niah) {
    j["niah"] = {{"haystack", o->haystack}, {"lengths", o->lengths}, {"depths", o->depths}, {"samples", o->samples},
                 {"max_new_tokens", o->max_new_tokens}, {"seed", static_cast<int64_t>(o->seed)}};
  }
  if (const auto& o = spec.heldout) {
    j["heldout"] = {{"data", o->data.string()}, {"max_length", o->window}, {"limit", o->limit},
                    {"stride", o->stride},         {"bucket_tokens", o->bucket_tokens}};
  }
  if (const auto& o = spec.zeroshot) {
    j["zeroshot"] = {{"data", o->data_dir.string()}, {"tasks", o->tasks}, {"limit", o->limit},
                     {"batch_tokens", o->batch_tokens}};
  }
  if (const auto& o = spec.ruler) {
    j["ruler"] = {{"lengths", o->lengths}, {"samples", o->samples}, {"tasks", o->tasks}, {"haystack", o->haystack},
                  {"seed", static_cast<int64_t>(o->seed)}};
    if (!o->squad.empty()) j["ruler"]["squad"] = o->squad.string();
    if (!o->hotpotqa.empty()) j["ruler"]["hotpotqa"] = o->hotpotqa.string();
    if (!o->cwe_words.empty()) j["ruler"]["cwe_words"] = o->cwe_words.string();
    if (!o->words_dir.empty()) j["ruler"]["words_dir"] = o->words_dir;
  }
  if (const auto& o = spec.synthetic) {
    j["synthetic"] = {{"samples", o->samples}, {"dense_reference", o->dense_reference}};
  }
  if (const auto& o = spec.coverage) {
    j["coverage"] = {{"samples", o->samples}, {"block_size", o->block_size}, {"top_k", o->top_k},
                     {"k_max", o->k_max},     {"p", o->p},                   {"before", o->before}};
  }
  return j;
}

}  // namespace sb
