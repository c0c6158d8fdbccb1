#include "harness/config/manifest.h"

#include <regex>
#include <set>
#include <stdexcept>

#include "harness/balance/batching_policy.h"
#include "harness/common/atomic_file.h"
#include "harness/config/json_object_reader.h"
#include "harness/dist/parallel_layout.h"
#include "kernels/attention/attention_backend.h"
#include "models/qwen2/qwen2_config.h"

namespace sb {
namespace {

using nlohmann::json;

bool is_safe_name(const std::string& name) {
  static const std::regex pattern("[A-Za-z0-9][A-Za-z0-9._-]*");
  return std::regex_match(name, pattern);
}

void expect_safe_name(const JsonObjectReader& r, const std::string& key, const std::string& name) {
  r.expect(is_safe_name(name), key, "\"" + name + "\" is not usable as a folder name",
           "use letters, digits, '.', '_' and '-', starting with a letter or digit");
}

ModelSection parse_model(const json& j, const std::string& path, const std::string& file) {
  JsonObjectReader r(j, path, file);
  ModelSection m;
  m.preset = r.required<std::string>("preset");
  r.finish();
  try {
    qwen2_preset(m.preset);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(file, r.child_path("preset"), e.what(), "use one of the known presets");
  }
  return m;
}

LengthComponent parse_length_component(const json& j, const std::string& path,
                                       const std::string& file) {
  JsonObjectReader r(j, path, file);
  LengthComponent c;
  c.weight = r.optional<double>("weight", 1.0);
  c.min_tokens = r.required<int64_t>("min_tokens");
  c.max_tokens = r.required<int64_t>("max_tokens");
  r.finish();
  r.expect(c.weight > 0, "weight", "must be > 0", "give each component a positive weight");
  r.expect(c.min_tokens >= 2, "min_tokens", "must be >= 2", "a sequence needs 2 tokens to predict one");
  r.expect(c.max_tokens >= c.min_tokens, "max_tokens", "must be >= min_tokens",
           "swap the bounds or raise max_tokens");
  return c;
}

SyntheticDataSection parse_synthetic(const json& j, const std::string& path,
                                     const std::string& file, int64_t model_vocab) {
  JsonObjectReader r(j, path, file);
  SyntheticDataSection s;
  s.task = r.optional_choice("task", s.task, {"arithmetic"});
  s.vocab_size = r.optional<int64_t>("vocab_size", 0);
  if (s.vocab_size == 0) s.vocab_size = model_vocab;
  s.prompt_tokens = r.optional<int64_t>("prompt_tokens", s.prompt_tokens);
  s.max_stride = r.optional<int64_t>("max_stride", s.max_stride);
  const json& mixture = expect_json_array(r.required_value("length_mixture"),
                                          r.child_path("length_mixture"), file);
  for (size_t i = 0; i < mixture.size(); ++i) {
    s.length_mixture.push_back(parse_length_component(
        mixture[i], r.child_path("length_mixture") + "[" + std::to_string(i) + "]", file));
  }
  r.finish();
  r.expect(s.vocab_size >= 2 && s.vocab_size <= model_vocab, "vocab_size",
           "must be in [2, " + std::to_string(model_vocab) + "] (the model's vocab_size)",
           "lower it or pick a model preset with a larger vocabulary");
  r.expect(s.prompt_tokens >= 1, "prompt_tokens", "must be >= 1", "use 1 or more");
  r.expect(s.max_stride >= 1 && s.max_stride < s.vocab_size, "max_stride",
           "must be in [1, vocab_size)", "use a small stride such as 3");
  r.expect(!s.length_mixture.empty(), "length_mixture", "must have at least one component",
           "add {\"min_tokens\": 64, \"max_tokens\": 512}");
  for (size_t i = 0; i < s.length_mixture.size(); ++i) {
    r.expect(s.length_mixture[i].min_tokens > s.prompt_tokens, "length_mixture",
             "component " + std::to_string(i) + " allows sequences no longer than the prompt",
             "raise min_tokens above prompt_tokens");
  }
  return s;
}

DataSection parse_data(const json& j, const std::string& path, const std::string& file,
                       int64_t model_vocab) {
  JsonObjectReader r(j, path, file);
  DataSection d;
  d.source = r.optional_choice("source", d.source, {"synthetic"});
  d.synthetic = parse_synthetic(r.required_value("synthetic"), r.child_path("synthetic"), file,
                                model_vocab);
  r.finish();
  return d;
}

ParallelismSection parse_parallelism(const json& j, const std::string& path,
                                     const std::string& file, int64_t model_layers) {
  JsonObjectReader r(j, path, file);
  ParallelismSection p;
  p.dp = r.optional<int64_t>("dp", p.dp);
  p.pp = r.optional<int64_t>("pp", p.pp);
  const int64_t tp = r.optional<int64_t>("tp", 1);
  if (const json* split = r.optional_value("stage_layers")) {
    const json& list = expect_json_array(*split, r.child_path("stage_layers"), file);
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string item = r.child_path("stage_layers") + "[" + std::to_string(i) + "]";
      if (!list[i].is_number_integer()) {
        throw ConfigError(file, item, "must be an integer (layers of stage " + std::to_string(i) + ")",
                          "list one layer count per pipeline stage");
      }
      p.stage_layers.push_back(list[i].get<int64_t>());
    }
  }
  p.timeout_s = r.optional<double>("timeout_s", p.timeout_s);
  p.bucket_mb = r.optional<double>("bucket_mb", p.bucket_mb);
  r.finish();
  r.expect(tp == 1, "tp", "tensor parallelism is reserved and not implemented",
           "remove \"tp\" (or set it to 1); use dp and pp");
  r.expect(p.dp >= 1, "dp", "must be >= 1", "use 1 for no data parallelism");
  r.expect(p.pp >= 1, "pp", "must be >= 1", "use 1 for no pipeline parallelism");
  r.expect(p.pp <= model_layers, "pp",
           "is larger than the model's " + std::to_string(model_layers) + " decoder layers",
           "every pipeline stage needs at least one layer; lower pp");
  r.expect(p.timeout_s >= 1, "timeout_s", "must be >= 1 (seconds)", "e.g. 60");
  r.expect(p.bucket_mb > 0, "bucket_mb", "must be > 0", "e.g. 25");
  if (p.stage_layers.empty()) {
    p.stage_layers = even_stage_split(model_layers, p.pp);
  } else {
    try {
      ParallelLayout(p.dp, p.pp, model_layers, p.stage_layers);
    } catch (const std::invalid_argument& e) {
      throw ConfigError(file, r.child_path("stage_layers"), e.what(),
                        "list pp layer counts, each >= 1, summing to the model's layers");
    }
  }
  return p;
}

CheckpointSection parse_checkpoint(const json& j, const std::string& path, const std::string& file) {
  JsonObjectReader r(j, path, file);
  CheckpointSection c;
  c.every_iterations = r.optional<int64_t>("every_iterations", c.every_iterations);
  c.keep_last = r.optional<int64_t>("keep_last", c.keep_last);
  c.at_end = r.optional<bool>("at_end", c.at_end);
  c.write_timeout_s = r.optional<double>("write_timeout_s", c.write_timeout_s);
  r.finish();
  r.expect(c.write_timeout_s >= 1, "write_timeout_s", "must be >= 1 (seconds)", "e.g. 1800");
  r.expect(c.every_iterations >= 0, "every_iterations", "must be >= 0", "use 0 for no periodic checkpoints");
  r.expect(c.keep_last >= 1, "keep_last", "must be >= 1", "keep at least the newest checkpoint");
  return c;
}

TrainSection parse_train(const json& j, const std::string& path, const std::string& file) {
  JsonObjectReader r(j, path, file);
  TrainSection t;
  t.device = r.optional_choice("device", t.device, {"cpu"});
  t.iterations = r.required<int64_t>("iterations");
  t.warmup_iterations = r.optional<int64_t>("warmup_iterations", t.warmup_iterations);
  t.global_batch_size = r.optional<int64_t>("global_batch_size", t.global_batch_size);
  t.max_tokens_per_microbatch =
      r.optional<int64_t>("max_tokens_per_microbatch", t.max_tokens_per_microbatch);
  t.lr = r.optional<double>("lr", t.lr);
  t.lr_warmup_fraction = r.optional<double>("lr_warmup_fraction", t.lr_warmup_fraction);
  t.min_lr_ratio = r.optional<double>("min_lr_ratio", t.min_lr_ratio);
  t.weight_decay = r.optional<double>("weight_decay", t.weight_decay);
  t.grad_clip = r.optional<double>("grad_clip", t.grad_clip);
  t.adam_beta1 = r.optional<double>("adam_beta1", t.adam_beta1);
  t.adam_beta2 = r.optional<double>("adam_beta2", t.adam_beta2);
  t.adam_eps = r.optional<double>("adam_eps", t.adam_eps);
  t.threads = r.optional<int64_t>("threads", t.threads);
  r.finish();
  r.expect(t.iterations >= 1, "iterations", "must be >= 1", "train for at least one iteration");
  r.expect(t.warmup_iterations >= 0 && t.warmup_iterations < t.iterations, "warmup_iterations",
           "must be in [0, iterations)", "leave at least one measured iteration");
  r.expect(t.global_batch_size >= 1, "global_batch_size", "must be >= 1", "use 1 or more");
  r.expect(t.max_tokens_per_microbatch >= 2, "max_tokens_per_microbatch", "must be >= 2",
           "use at least the longest sequence length");
  r.expect(t.lr > 0, "lr", "must be > 0", "use a positive learning rate");
  r.expect(t.lr_warmup_fraction >= 0 && t.lr_warmup_fraction <= 1, "lr_warmup_fraction",
           "must be in [0, 1]", "use e.g. 0.2 for 20% warm-up");
  r.expect(t.min_lr_ratio >= 0 && t.min_lr_ratio <= 1, "min_lr_ratio", "must be in [0, 1]",
           "use 1 for a constant rate after warm-up");
  r.expect(t.weight_decay >= 0, "weight_decay", "must be >= 0", "use 0 to disable");
  r.expect(t.grad_clip >= 0, "grad_clip", "must be >= 0", "use 0 to disable clipping");
  r.expect(t.adam_beta1 >= 0 && t.adam_beta1 < 1, "adam_beta1", "must be in [0, 1)", "e.g. 0.9");
  r.expect(t.adam_beta2 >= 0 && t.adam_beta2 < 1, "adam_beta2", "must be in [0, 1)", "e.g. 0.95");
  r.expect(t.adam_eps > 0, "adam_eps", "must be > 0", "e.g. 1e-8");
  r.expect(t.threads >= 0, "threads", "must be >= 0", "use 0 for LibTorch's default");
  return t;
}

MethodSection parse_method(const json& j, const std::string& path, const std::string& file) {
  JsonObjectReader r(j, path, file);
  MethodSection m;
  m.name = r.required<std::string>("name");
  m.attention = r.optional_choice("attention", m.attention, manifest_attention_choices());
  m.batching = r.optional_choice("batching", m.batching, manifest_batching_choices());
  r.finish();
  expect_safe_name(r, "name", m.name);
  return m;
}

int64_t longest_synthetic_sequence(const SyntheticDataSection& s) {
  int64_t longest = 0;
  for (const auto& c : s.length_mixture) longest = std::max(longest, c.max_tokens);
  return longest;
}

}  // namespace

std::vector<std::string> manifest_attention_choices() { return attention_backend_names(); }
std::vector<std::string> manifest_batching_choices() { return batching_policy_names(); }

Manifest parse_manifest(const json& j, const std::string& file) {
  JsonObjectReader r(j, "$", file);
  Manifest m;
  m.name = r.required<std::string>("name");
  expect_safe_name(r, "name", m.name);
  m.description = r.optional<std::string>("description", "");
  m.seed = r.optional<int64_t>("seed", m.seed);
  m.model = parse_model(r.required_value("model"), r.child_path("model"), file);
  const auto& model = qwen2_preset(m.model.preset);
  m.data = parse_data(r.required_value("data"), r.child_path("data"), file, model.vocab_size);
  // Parsed even when absent: the stage split's default depends on the model.
  const json* parallelism = r.optional_value("parallelism");
  m.parallelism = parse_parallelism(parallelism ? *parallelism : json::object(),
                                    r.child_path("parallelism"), file, model.num_hidden_layers);
  if (const json* c = r.optional_value("checkpoint")) {
    m.checkpoint = parse_checkpoint(*c, r.child_path("checkpoint"), file);
  }
  m.train = parse_train(r.required_value("train"), r.child_path("train"), file);
  const json& methods =
      expect_json_array(r.required_value("methods"), r.child_path("methods"), file);
  std::set<std::string> names;
  for (size_t i = 0; i < methods.size(); ++i) {
    std::string path = r.child_path("methods") + "[" + std::to_string(i) + "]";
    m.methods.push_back(parse_method(methods[i], path, file));
    if (!names.insert(m.methods.back().name).second) {
      throw ConfigError(file, path + ".name", "duplicate method name \"" +
                                                  m.methods.back().name + "\"",
                        "give every method a unique name (it names the run's folder)");
    }
  }
  r.finish();
  r.expect(!m.methods.empty(), "methods", "must list at least one method",
           "add {\"name\": \"dense\"}");
  int64_t longest = longest_synthetic_sequence(m.data.synthetic);
  if (longest > model.max_position_embeddings) {
    throw ConfigError(file, "$.data.synthetic.length_mixture",
                      "sequences up to " + std::to_string(longest) + " tokens exceed the model's " +
                          std::to_string(model.max_position_embeddings) + " positions",
                      "lower max_tokens or use a model with more positions");
  }
  if (longest > m.train.max_tokens_per_microbatch) {
    throw ConfigError(file, "$.train.max_tokens_per_microbatch",
                      "is smaller than the longest sequence (" + std::to_string(longest) +
                          " tokens), which could never be scheduled",
                      "raise it to at least " + std::to_string(longest));
  }
  return m;
}

Manifest load_manifest(const std::filesystem::path& path) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const std::exception& e) {
    throw ConfigError(path.string(), "", e.what(), "check the manifest path");
  }
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    // Turn nlohmann's byte offset into a line and column a user can jump to.
    size_t offset = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    size_t line = 1, column = 1;
    for (size_t i = 0; i < offset; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw ConfigError(path.string() + ":" + std::to_string(line) + ":" + std::to_string(column),
                      "", std::string("invalid JSON: ") + e.what(), "fix the JSON syntax there");
  }
  return parse_manifest(j, path.string());
}

json manifest_to_json(const Manifest& m) {
  json mixture = json::array();
  for (const auto& c : m.data.synthetic.length_mixture) {
    mixture.push_back({{"weight", c.weight}, {"min_tokens", c.min_tokens}, {"max_tokens", c.max_tokens}});
  }
  json methods = json::array();
  for (const auto& method : m.methods) {
    methods.push_back({{"name", method.name}, {"attention", method.attention},
                       {"batching", method.batching}});
  }
  const auto& t = m.train;
  return json{
      {"name", m.name},
      {"description", m.description},
      {"seed", m.seed},
      {"model", {{"preset", m.model.preset}}},
      {"data",
       {{"source", m.data.source},
        {"synthetic",
         {{"task", m.data.synthetic.task},
          {"vocab_size", m.data.synthetic.vocab_size},
          {"prompt_tokens", m.data.synthetic.prompt_tokens},
          {"max_stride", m.data.synthetic.max_stride},
          {"length_mixture", mixture}}}}},
      {"parallelism",
       {{"dp", m.parallelism.dp},
        {"pp", m.parallelism.pp},
        {"stage_layers", m.parallelism.stage_layers},
        {"timeout_s", m.parallelism.timeout_s},
        {"bucket_mb", m.parallelism.bucket_mb}}},
      {"checkpoint",
       {{"every_iterations", m.checkpoint.every_iterations},
        {"keep_last", m.checkpoint.keep_last},
        {"at_end", m.checkpoint.at_end},
        {"write_timeout_s", m.checkpoint.write_timeout_s}}},
      {"train",
       {{"device", t.device},
        {"iterations", t.iterations},
        {"warmup_iterations", t.warmup_iterations},
        {"global_batch_size", t.global_batch_size},
        {"max_tokens_per_microbatch", t.max_tokens_per_microbatch},
        {"lr", t.lr},
        {"lr_warmup_fraction", t.lr_warmup_fraction},
        {"min_lr_ratio", t.min_lr_ratio},
        {"weight_decay", t.weight_decay},
        {"grad_clip", t.grad_clip},
        {"adam_beta1", t.adam_beta1},
        {"adam_beta2", t.adam_beta2},
        {"adam_eps", t.adam_eps},
        {"threads", t.threads}}},
      {"methods", methods},
  };
}

std::vector<RunSpec> expand_runs(const Manifest& manifest) {
  std::vector<RunSpec> runs;
  for (const auto& method : manifest.methods) {
    RunSpec run;
    run.name = method.name;
    run.manifest = manifest;
    run.manifest.methods = {method};
    runs.push_back(std::move(run));
  }
  return runs;
}

}  // namespace sb
