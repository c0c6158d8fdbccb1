#include "harness/config/manifest.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <stdexcept>

#include "harness/common/atomic_file.h"
#include "harness/common/json_differences.h"
#include "harness/common/json_object_reader.h"
#include "harness/config/strict_json.h"
#include "harness/data/synthetic_dataset.h"
#include "harness/parallel/parallel_layout.h"
#include "models/qwen2/qwen2_config.h"
#include "models/qwen2/qwen2_hf_config.h"
#include "models/qwen2/qwen2_lora.h"
#include "models/qwen2/qwen2_precision.h"

#ifdef SB_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace sb {

const OptionNames<NonFinitePolicy>& nonfinite_options() {
  static const OptionNames<NonFinitePolicy> names{
      "non-finite loss policy", {{"stop", NonFinitePolicy::kStop}, {"skip", NonFinitePolicy::kSkip}}};
  return names;
}

const OptionNames<LrSchedule>& lr_schedule_options() {
  static const OptionNames<LrSchedule> names{
      "learning-rate schedule", {{"cosine", LrSchedule::kCosine}, {"constant", LrSchedule::kConstant}}};
  return names;
}

const OptionNames<TrainDevice>& train_device_options() {
  static const OptionNames<TrainDevice> names{"device", {{"cpu", TrainDevice::kCpu}, {"cuda", TrainDevice::kCuda}}};
  return names;
}

const OptionNames<TrainCollectives>& train_collectives_options() {
  static const OptionNames<TrainCollectives> names{
      "collectives", {{"auto", TrainCollectives::kAuto}, {"gloo", TrainCollectives::kGloo}}};
  return names;
}

ParallelLayout parallel_layout_of(const Manifest& m) {
  return ParallelLayout(m.parallelism.dp, m.parallelism.pp, m.model.config.num_hidden_layers,
                        m.parallelism.stage_layers, m.parallelism.cp, m.parallelism.tp);
}

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

// The manifest's rope_scaling applied to the architecture, read as config.json's.
ModelSection with_rope_scaling(ModelSection m, const JsonObjectReader& r) {
  if (m.rope_scaling.is_null()) return m;
  r.expect(m.rope_scaling.is_object(), "rope_scaling", "must be an object",
           "e.g. {\"type\": \"yarn\", \"factor\": 16, \"original_max_position_embeddings\": 32768}");
  json hf = qwen2_config_to_hf_json(m.config);
  hf.erase("rope_parameters");
  hf["rope_scaling"] = m.rope_scaling;
  try {
    const std::string name = m.config.name;
    m.config = qwen2_config_from_hf_json(hf, r.child_path("rope_scaling"));
    m.config.name = name;
  } catch (const std::invalid_argument& e) {
    r.expect(false, "rope_scaling", e.what(),
             "give {\"type\": \"yarn\", \"factor\": F, \"original_max_position_embeddings\": N} as Qwen2.5's "
             "card writes it");
  }
  return m;
}

ModelSection parse_model(const json& j, const std::string& path, const std::string& file) {
  JsonObjectReader r(j, path, file);
  ModelSection m;
  m.preset = r.optional<std::string>("preset", "");
  const std::string from = r.optional<std::string>("from", "");
  if (const json* rope = r.optional_value("rope_scaling")) m.rope_scaling = *rope;
  r.finish();
  r.expect(!m.preset.empty() || !from.empty(), "preset", "is missing, and so is \"from\"",
           "name a preset (\"qwen2.5-0.5b\") or a Hugging Face folder to start from (\"from\": \"DIR\")");
  if (!m.preset.empty()) {
    try {
      m.config = qwen2_preset(m.preset);
    } catch (const std::invalid_argument& e) {
      throw ConfigError(file, r.child_path("preset"), e.what(), "use one of the known presets");
    }
  }
  if (from.empty()) return with_rope_scaling(std::move(m), r);
  m.from = resolve_manifest_path(file, from);
  const std::filesystem::path dir(m.from);
  const std::string where = r.child_path("from");
  const std::string fix = "point it at a Qwen2/Qwen2.5 folder with config.json and *.safetensors "
                          "(e.g. --set model.from=/models/Qwen2.5-0.5B)";
  if (!std::filesystem::is_directory(dir)) throw ConfigError(file, where, m.from + " is not a folder", fix);
  if (!std::filesystem::exists(dir / "config.json")) throw ConfigError(file, where, m.from + " has no config.json", fix);
  Qwen2Config folder;
  try {
    folder = qwen2_config_from_hf_file(dir / "config.json");
  } catch (const std::invalid_argument& e) {
    throw ConfigError(file, where, e.what(), fix);
  }
  if (!m.preset.empty()) {
    // RoPE scaling extends a model's positions without changing its architecture:
    // Qwen2.5's card adds YaRN to the published config.json for inputs past 32K.
    Qwen2Config unscaled = folder;
    unscaled.yarn.reset();
    const std::string differences =
        json_field_differences(qwen2_config_to_hf_json(unscaled), qwen2_config_to_hf_json(m.config));
    r.expect(differences.empty(), "from",
             m.from + "/config.json is not the architecture of preset \"" + m.preset + "\": " + differences +
                 " (folder vs preset)",
             "point it at a checkpoint of that model, or remove \"preset\" to train whatever the folder holds");
    folder.name = m.preset;
  } else {
    folder.name = dir.filename().string();
  }
  m.config = folder;
  return with_rope_scaling(std::move(m), r);
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
  s.task = r.optional_option("task", s.task, synthetic_task_options());
  s.vocab_size = r.optional<int64_t>("vocab_size", 0);
  if (s.vocab_size == 0) s.vocab_size = model_vocab;
  const bool arithmetic = s.task == SyntheticTask::kArithmetic;
  const bool retrieval = s.task == SyntheticTask::kRetrieval;
  const bool copy = s.task == SyntheticTask::kCopy;
  r.reject_unless("prompt_tokens", arithmetic, "task is \"arithmetic\"");
  r.reject_unless("max_stride", arithmetic, "task is \"arithmetic\"");
  r.reject_unless("key_tokens", retrieval, "task is \"retrieval\"");
  r.reject_unless("answer_tokens", retrieval, "task is \"retrieval\"");
  r.reject_unless("lag", copy, "task is \"copy\"");
  if (arithmetic) {
    s.prompt_tokens = r.optional<int64_t>("prompt_tokens", s.prompt_tokens);
    s.max_stride = r.optional<int64_t>("max_stride", s.max_stride);
  } else if (retrieval) {
    s.key_tokens = r.optional<int64_t>("key_tokens", s.key_tokens);
    s.answer_tokens = r.optional<int64_t>("answer_tokens", s.answer_tokens);
  } else {
    s.lag = r.optional<int64_t>("lag", s.lag);
    r.expect(s.lag >= 1, "lag", "must be >= 1", "give how many positions back each token repeats");
  }
  std::vector<std::string> length_choices{"mixture", "file"};
  for (const std::string& name : length_profile_names()) length_choices.push_back(name);
  const std::string lengths = r.optional_choice("lengths", "mixture", length_choices);
  if (lengths == "mixture") {
    s.lengths = LengthSource::kMixture;
  } else if (lengths == "file") {
    s.lengths = LengthSource::kFile;
  } else {
    s.lengths = LengthSource::kProfile;
    s.length_profile = lengths;
  }
  s.length_scale = r.optional<double>("length_scale", s.length_scale);
  r.reject_unless("length_mixture", s.lengths == LengthSource::kMixture, "lengths is \"mixture\"");
  r.reject_unless("length_file", s.lengths == LengthSource::kFile, "lengths is \"file\"");
  if (s.lengths == LengthSource::kMixture) {
    const json& mixture = expect_json_array(r.required_value("length_mixture"),
                                            r.child_path("length_mixture"), file);
    for (size_t i = 0; i < mixture.size(); ++i) {
      s.length_mixture.push_back(parse_length_component(
          mixture[i], r.child_path("length_mixture") + "[" + std::to_string(i) + "]", file));
    }
    r.expect(!s.length_mixture.empty(), "length_mixture", "must have at least one component",
             "add {\"min_tokens\": 64, \"max_tokens\": 512}");
  } else if (s.lengths == LengthSource::kFile) {
    s.length_file = resolve_manifest_path(file, r.required<std::string>("length_file"));
  }
  r.finish();
  r.expect(s.vocab_size >= 4 && s.vocab_size <= model_vocab, "vocab_size",
           "must be in [4, " + std::to_string(model_vocab) + "] (the model's vocab_size)",
           "lower it or pick a model preset with a larger vocabulary");
  r.expect(s.length_scale > 0, "length_scale", "must be > 0", "e.g. 0.015625 (1/64) for a CPU run");
  if (arithmetic) {
    r.expect(s.prompt_tokens >= 1, "prompt_tokens", "must be >= 1", "use 1 or more");
    r.expect(s.max_stride >= 1 && s.max_stride < s.vocab_size, "max_stride",
             "must be in [1, vocab_size)", "use a small stride such as 3");
    for (size_t i = 0; i < s.length_mixture.size(); ++i) {
      r.expect(s.length_mixture[i].min_tokens * s.length_scale > s.prompt_tokens, "length_mixture",
               "component " + std::to_string(i) + " allows sequences no longer than the prompt",
               "raise min_tokens above prompt_tokens");
    }
  } else {
    r.expect(s.key_tokens >= 1, "key_tokens", "must be >= 1", "e.g. 2");
    r.expect(s.answer_tokens >= 1, "answer_tokens", "must be >= 1", "e.g. 8");
    r.expect(s.vocab_size > s.key_tokens + 2, "vocab_size", "must exceed key_tokens + 2",
             "use a larger vocabulary");
  }
  return s;
}

// model_dir: model.from ("" without one); its tokenizer.json is the default tokenizer.
JsonlDataSection parse_jsonl(const json& j, const std::string& path, const std::string& file,
                             const std::string& model_dir) {
  JsonObjectReader r(j, path, file);
  JsonlDataSection d;
  d.path = resolve_manifest_path(file, r.required<std::string>("path"));
  const std::filesystem::path model_tokenizer = std::filesystem::path(model_dir) / "tokenizer.json";
  if (!model_dir.empty() && std::filesystem::exists(model_tokenizer)) {
    d.tokenizer = resolve_manifest_path(file, r.optional<std::string>("tokenizer", model_tokenizer.string()));
  } else {
    r.expect(model_dir.empty() || r.optional_value("tokenizer") != nullptr, "tokenizer",
             "is missing, and model.from (" + model_dir + ") has no tokenizer.json to default to",
             "name the model's tokenizer.json, or copy it into the model folder");
    d.tokenizer = resolve_manifest_path(file, r.required<std::string>("tokenizer"));
  }
  d.too_long = r.optional_option("too_long", d.too_long, too_long_options());
  d.shuffle = r.optional<bool>("shuffle", d.shuffle);
  r.finish();
  return d;
}

TokenizedDataSection parse_tokenized(const json& j, const std::string& path, const std::string& file) {
  JsonObjectReader r(j, path, file);
  TokenizedDataSection d;
  d.path = resolve_manifest_path(file, r.required<std::string>("path"));
  d.too_long = r.optional_option("too_long", d.too_long, too_long_options());
  d.shuffle = r.optional<bool>("shuffle", d.shuffle);
  r.finish();
  return d;
}

DataSection parse_data(const json& j, const std::string& path, const std::string& file,
                       const ModelSection& model) {
  const int64_t model_vocab = model.config.vocab_size;
  JsonObjectReader r(j, path, file);
  DataSection d;
  d.source = r.optional_option("source", d.source, data_source_options());
  r.reject_unless("synthetic", d.source == DataSource::kSynthetic, "source is \"synthetic\"");
  r.reject_unless("jsonl", d.source == DataSource::kJsonl, "source is \"jsonl\"");
  r.reject_unless("tokenized", d.source == DataSource::kTokenized, "source is \"tokenized\"");
  if (d.source == DataSource::kSynthetic) {
    d.synthetic = parse_synthetic(r.required_value("synthetic"), r.child_path("synthetic"), file,
                                  model_vocab);
  } else if (d.source == DataSource::kJsonl) {
    d.jsonl = parse_jsonl(r.required_value("jsonl"), r.child_path("jsonl"), file, model.from);
  } else {
    d.tokenized = parse_tokenized(r.required_value("tokenized"), r.child_path("tokenized"), file);
  }
  r.finish();
  return d;
}

ParallelismSection parse_parallelism(const json& j, const std::string& path,
                                     const std::string& file, int64_t model_layers) {
  JsonObjectReader r(j, path, file);
  ParallelismSection p;
  p.dp = r.optional<int64_t>("dp", p.dp);
  p.pp = r.optional<int64_t>("pp", p.pp);
  p.tp = r.optional<int64_t>("tp", p.tp);
  p.cp = r.optional<int64_t>("cp", p.cp);
  p.cp_layout.kind = r.optional_option("cp_layout", p.cp_layout.kind, cp_layout_options());
  p.cp_layout.stripe_tokens = r.optional<int64_t>("cp_stripe_tokens", p.cp_layout.stripe_tokens);
  p.cp_inner = r.optional<int64_t>("cp_inner", p.cp_inner);
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
  r.expect(p.tp >= 1, "tp", "must be >= 1", "use 1 for no tensor parallelism");
  r.expect(p.dp >= 1, "dp", "must be >= 1", "use 1 for no data parallelism");
  r.expect(p.pp >= 1, "pp", "must be >= 1", "use 1 for no pipeline parallelism");
  r.expect(p.cp >= 1, "cp", "must be >= 1", "use 1 for no context parallelism");
  r.expect(p.cp_layout.stripe_tokens >= 1, "cp_stripe_tokens", "must be >= 1", "MTraining uses 128");
  r.expect(p.cp_inner >= 0 && (p.cp_inner == 0 || p.cp % p.cp_inner == 0), "cp_inner",
           "must divide cp (ranks per inner ring; 0 for a flat ring), got " + std::to_string(p.cp_inner),
           "use 0, or a divisor of cp such as the GPUs per node");
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

// "a", "b", "c" for messages.
std::string join_choices(const std::vector<std::string>& choices) {
  std::string text;
  for (const auto& choice : choices) text += (text.empty() ? "\"" : ", \"") + choice + "\"";
  return text;
}

LoraSection parse_lora(const json& j, const std::string& path, const std::string& file) {
  JsonObjectReader r(j, path, file);
  LoraSection l;
  l.rank = r.required<int64_t>("rank");
  l.alpha = r.required<double>("alpha");
  l.dropout = r.optional<double>("dropout", l.dropout);
  const json& targets = expect_json_array(r.required_value("target_modules"),
                                          r.child_path("target_modules"), file);
  r.finish();
  r.expect(l.rank >= 1, "rank", "must be >= 1", "use e.g. 32 (the paper's 3B LoRA)");
  r.expect(l.alpha > 0, "alpha", "must be > 0", "use e.g. 64 (scale alpha / rank = 2)");
  r.expect(l.dropout >= 0 && l.dropout < 1, "dropout", "must be in [0, 1)", "use e.g. 0.05");
  r.expect(!targets.empty(), "target_modules", "must name at least one projection",
           "list some of: " + join_choices(qwen2_lora_module_names()));
  const auto& known = qwen2_lora_module_names();
  for (size_t i = 0; i < targets.size(); ++i) {
    const std::string element_path = r.child_path("target_modules") + "[" + std::to_string(i) + "]";
    const auto name = r.convert<std::string>(targets[i], element_path);
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      throw ConfigError(file, element_path, "unknown projection \"" + name + "\"",
                        "use one of: " + join_choices(known));
    }
    if (std::find(l.target_modules.begin(), l.target_modules.end(), name) != l.target_modules.end()) {
      throw ConfigError(file, element_path, "\"" + name + "\" is listed twice", "list it once");
    }
    l.target_modules.push_back(name);
  }
  return l;
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
  t.device = r.optional_option("device", t.device, train_device_options());
  t.collectives = r.optional_option("collectives", t.collectives, train_collectives_options());
  t.iterations = r.required<int64_t>("iterations");
  t.warmup_iterations = r.optional<int64_t>("warmup_iterations", t.warmup_iterations);
  t.global_batch_size = r.optional<int64_t>("global_batch_size", t.global_batch_size);
  t.max_tokens_per_microbatch =
      r.optional<int64_t>("max_tokens_per_microbatch", t.max_tokens_per_microbatch);
  t.max_samples_per_microbatch =
      r.optional<int64_t>("max_samples_per_microbatch", t.max_samples_per_microbatch);
  t.lr = r.optional<double>("lr", t.lr);
  t.lr_warmup_fraction = r.optional<double>("lr_warmup_fraction", t.lr_warmup_fraction);
  t.min_lr_ratio = r.optional<double>("min_lr_ratio", t.min_lr_ratio);
  t.weight_decay = r.optional<double>("weight_decay", t.weight_decay);
  t.grad_clip = r.optional<double>("grad_clip", t.grad_clip);
  t.adam_beta1 = r.optional<double>("adam_beta1", t.adam_beta1);
  t.adam_beta2 = r.optional<double>("adam_beta2", t.adam_beta2);
  t.adam_eps = r.optional<double>("adam_eps", t.adam_eps);
  t.threads = r.optional<int64_t>("threads", t.threads);
  t.lr_schedule = r.optional_option("lr_schedule", t.lr_schedule, lr_schedule_options());
  t.nonfinite = r.optional_option("nonfinite", t.nonfinite, nonfinite_options());
  t.activation_checkpointing =
      r.optional<bool>("activation_checkpointing", t.activation_checkpointing);
  t.precision = qwen2_precision_from_name(
      r.optional_choice("precision", qwen2_precision_name(t.precision), qwen2_precision_names()));
  if (const json* lora = r.optional_value("lora")) {
    t.lora = parse_lora(*lora, r.child_path("lora"), file);
  }
  r.finish();
  r.expect(t.iterations >= 1, "iterations", "must be >= 1", "train for at least one iteration");
  r.expect(t.warmup_iterations >= 0 && t.warmup_iterations < t.iterations, "warmup_iterations",
           "must be in [0, iterations)", "leave at least one measured iteration");
  r.expect(t.global_batch_size >= 1, "global_batch_size", "must be >= 1", "use 1 or more");
  r.expect(t.max_samples_per_microbatch >= 0, "max_samples_per_microbatch", "must be >= 0",
           "use 0 for no limit or 1 for one sequence per micro-batch");
  r.expect(t.max_tokens_per_microbatch >= 2, "max_tokens_per_microbatch", "must be >= 2",
           "use at least the longest sequence length");
  r.expect(t.lr > 0 && t.lr <= kMaxLearningRate, "lr", "must be in (0, 1]",
           "AdamW fine-tuning uses about 1e-6 to 1e-3; a larger rate only diverges");
  r.expect(t.lr_warmup_fraction >= 0 && t.lr_warmup_fraction <= 1, "lr_warmup_fraction",
           "must be in [0, 1]", "use e.g. 0.2 for 20% warm-up");
  r.expect(t.min_lr_ratio >= 0 && t.min_lr_ratio <= 1, "min_lr_ratio", "must be in [0, 1]",
           "use 1 for a constant rate after warm-up");
  r.expect(t.weight_decay >= 0, "weight_decay", "must be >= 0", "use 0 to disable");
  r.expect(t.grad_clip >= 0, "grad_clip", "must be >= 0", "use 0 to disable clipping");
  r.expect(t.adam_beta1 >= 0 && t.adam_beta1 < 1, "adam_beta1", "must be in [0, 1)", "e.g. 0.9");
  r.expect(t.adam_beta2 >= 0 && t.adam_beta2 < 1, "adam_beta2", "must be in [0, 1)", "e.g. 0.95");
  r.expect(t.adam_eps > 0, "adam_eps", "must be > 0", "e.g. 1e-8");
  r.expect(t.threads >= 0 && t.threads <= kMaxTrainThreads, "threads",
           "must be in [0, " + std::to_string(kMaxTrainThreads) + "]",
           "use 0 for LibTorch's default, or at most the cores one rank may use");
  return t;
}

// The first method whose attention pattern cannot train as the manifest says
// (AttentionPattern::training_problem: its kernels' dtypes, head_dim, cp), as a ConfigError
// naming train.precision or the method's attention.
void check_patterns_can_train(const Manifest& m) {
  for (size_t i = 0; i < m.methods.size(); ++i) {
    const std::string method = "methods[" + std::to_string(i) + "]";
    const AttentionTrainingSetting setting{m.train.on_cuda(), m.train.precision == Qwen2Precision::kBFloat16Mixed,
                                           m.model.config.head_dim, qwen2_precision_name(m.train.precision), method,
                                           m.parallelism.cp};
    if (const auto problem = m.methods[i].attention.pattern().training_problem(setting)) {
      throw ConfigError(m.file, problem->key == "precision" ? "$.train.precision" : "$." + method + ".attention",
                        problem->problem, problem->fix);
    }
  }
}

// train.device "cuda": this build has the CUDA kernels, every method's pattern can train
// there (check_patterns_can_train), and this machine sees a GPU. Each rank then uses the
// GPU of its local rank (harness/parallel/rank_context.cpp).
void check_cuda_training(const Manifest& m) {
#ifndef SB_WITH_CUDA
  throw ConfigError(m.file, "$.train.device",
                    "is \"cuda\" but this build of sparsebalance has no CUDA kernels (configured without nvcc)",
                    "rebuild with the CUDA toolkit on the PATH (SB_CUDA=ON), or set train.device to \"cpu\"");
#else
  check_patterns_can_train(m);
  if (c10::cuda::device_count() == 0) {
    throw ConfigError(m.file, "$.train.device", "is \"cuda\" but no CUDA device is visible on this machine",
                      "run on a machine with a GPU (check nvidia-smi and CUDA_VISIBLE_DEVICES), or set "
                      "train.device to \"cpu\"");
  }
#endif
}

// What tensor parallelism needs of the model and the run (docs/tensor_parallel.md).
void check_tensor_parallel_training(const Manifest& m) {
  const int64_t tp = m.parallelism.tp;
  const Qwen2Config& c = m.model.config;
  const std::string tp_text = std::to_string(tp);
  if (c.num_key_value_heads % tp != 0) {
    throw ConfigError(m.file, "$.parallelism.tp",
                      "is " + tp_text + " but the model's " + std::to_string(c.num_key_value_heads) +
                          " key/value heads do not divide by it (each TP rank keeps whole GQA groups)",
                      "use a tp that divides num_key_value_heads");
  }
  if (c.intermediate_size % tp != 0) {
    throw ConfigError(m.file, "$.parallelism.tp",
                      "is " + tp_text + " but the model's intermediate_size " + std::to_string(c.intermediate_size) +
                          " does not divide by it",
                      "use a tp that divides intermediate_size");
  }
  if (c.vocab_size < tp) {
    throw ConfigError(m.file, "$.parallelism.tp", "is larger than the vocabulary (" + std::to_string(c.vocab_size) + ")",
                      "lower tp");
  }
}

}  // namespace

void check_runnable_by_trainer(const Manifest& m) {
  if (m.parallelism.tp > 1) check_tensor_parallel_training(m);
  // Before the machine checks: what the manifest asks for is refused the same on any machine.
  if (m.parallelism.cp > 1 && m.train.on_cuda()) {
    // The GPU ring runs each step on the fused block-sparse kernels (docs/context_parallel.md, "On GPUs").
    if (m.train.precision != Qwen2Precision::kBFloat16Mixed) {
      throw ConfigError(m.file, "$.train.precision",
                        "is \"" + std::string(qwen2_precision_name(m.train.precision)) +
                            "\" with parallelism.cp > 1 on CUDA: the GPU ring's fused block-sparse kernels run in bfloat16",
                        "set train.precision to \"bf16-mixed\"");
    }
    const int64_t head_dim = m.model.config.head_dim;
    if (head_dim != 64 && head_dim != 128) {
      throw ConfigError(m.file, "$.parallelism.cp",
                        "is " + std::to_string(m.parallelism.cp) + " on CUDA but the model's head_dim is " +
                            std::to_string(head_dim) + ": the GPU ring's fused block-sparse kernels take 64 or 128",
                        "use a model with head_dim 64 or 128, or set train.device to \"cpu\"");
    }
    const CpLayout& layout = m.parallelism.cp_layout;
    if (layout.kind == CpLayoutKind::kStriped && layout.stripe_tokens < kGpuRingMinStripeTokens) {
      throw ConfigError(m.file, "$.parallelism.cp_stripe_tokens",
                        "is " + std::to_string(layout.stripe_tokens) + " with the striped layout on CUDA: each stripe "
                        "is a tile of the GPU ring's kernels (64 rows), and a step's tables grow with the square of "
                        "the stripes a rank holds",
                        "use " + std::to_string(kGpuRingMinStripeTokens) + " or more (MTraining stripes by 128)");
    }
  }
  if (m.parallelism.cp > 1 && !m.train.on_cuda() && m.train.precision != Qwen2Precision::kFloat32) {
    throw ConfigError(m.file, "$.train.precision",
                      "is \"" + std::string(qwen2_precision_name(m.train.precision)) +
                          "\" with parallelism.cp > 1: the CPU ring attention computes in float32 or float64",
                      "set train.precision to \"fp32\" for context parallelism on the CPU");
  }
  if (m.train.on_cuda()) check_cuda_training(m);
  if (!m.train.on_cuda()) check_patterns_can_train(m);  // on CUDA: check_cuda_training
  // The simulation's profile serves only `simulate`: the trainer needs the method's own.
  for (size_t i = 0; i < m.methods.size(); ++i) {
    check_method_profile(m.methods[i], "$.methods[" + std::to_string(i) + "]", m.file, false);
  }
}

Manifest parse_manifest(const json& j, const std::string& file) {
  JsonObjectReader r(j, "$", file);
  Manifest m;
  m.source = j;
  m.file = file;
  m.name = r.required<std::string>("name");
  expect_safe_name(r, "name", m.name);
  m.description = r.optional<std::string>("description", "");
  m.seed = r.optional<int64_t>("seed", m.seed);
  m.model = parse_model(r.required_value("model"), r.child_path("model"), file);
  const Qwen2Config& model = m.model.config;
  m.data = parse_data(r.required_value("data"), r.child_path("data"), file, m.model);
  // Parsed even when absent: the stage split's default depends on the model.
  const json* parallelism = r.optional_value("parallelism");
  m.parallelism = parse_parallelism(parallelism ? *parallelism : json::object(),
                                    r.child_path("parallelism"), file, model.num_hidden_layers);
  if (const json* c = r.optional_value("checkpoint")) {
    m.checkpoint = parse_checkpoint(*c, r.child_path("checkpoint"), file);
  }
  m.train = parse_train(r.required_value("train"), r.child_path("train"), file);
  const json* method_defaults = r.optional_value("method_defaults");
  if (method_defaults != nullptr) check_method_defaults(*method_defaults, "$.method_defaults", file);
  const json& methods =
      expect_json_array(r.required_value("methods"), r.child_path("methods"), file);
  std::set<std::string> names;
  for (size_t i = 0; i < methods.size(); ++i) {
    std::string path = r.child_path("methods") + "[" + std::to_string(i) + "]";
    m.methods.push_back(parse_method_section(methods[i], method_defaults, path, file));
    {
      JsonObjectReader name_check(methods[i], path, file);
      expect_safe_name(name_check, "name", m.methods.back().name);
    }
    if (!names.insert(m.methods.back().name).second) {
      throw ConfigError(file, path + ".name", "duplicate method name \"" +
                                                  m.methods.back().name + "\"",
                        "give every method a unique name (it names the run's folder)");
    }
  }
  m.baseline = r.optional<std::string>("baseline", m.methods.empty() ? "" : m.methods.front().name);
  if (const json* sweep = r.optional_value("sweep")) m.sweep = parse_sweep(*sweep, file);
  m.max_runs = r.optional<int64_t>("max_runs", m.max_runs);
  r.expect(m.max_runs >= 1, "max_runs", "must be >= 1", "leave it out for " + std::to_string(kDefaultMaxRuns));
  if (const json* interleave = r.optional_value("interleave")) {
    JsonObjectReader i(*interleave, r.child_path("interleave"), file);
    m.interleave_block_iterations = i.required<int64_t>("block_iterations");
    i.finish();
    i.expect(m.interleave_block_iterations >= 1, "block_iterations", "must be >= 1",
             "leave \"interleave\" out to run the methods one after another");
  }
  for (const SweepAxis& axis : m.sweep) {
    if (axis.path == "interleave" || axis.path.rfind("interleave.", 0) == 0) {
      throw ConfigError(file, "$.sweep[\"" + axis.path + "\"]",
                        "sweeps how runs are scheduled, which is one choice for the whole invocation",
                        "set \"interleave\" at the manifest's top level, or write one manifest per choice");
    }
  }
  if (const json* eval = r.optional_value("eval")) {
    m.eval = parse_eval_spec(*eval, r.child_path("eval"), file,
                             std::filesystem::path(resolve_manifest_path(file, ".")));
    r.expect(!m.eval->synthetic || m.data.source == DataSource::kSynthetic, "eval",
             "has \"synthetic\", which scores held-out samples of synthetic data, but data.source is " +
                 data_source_options().name_of(m.data.source),
             "remove eval.synthetic, or use \"heldout\" with a file of held-out documents");
    if (const auto& coverage = m.eval->coverage) {
      r.expect(m.data.source == DataSource::kSynthetic, "eval",
               "has \"coverage\", which routes held-out samples of synthetic data, but data.source is " +
                   data_source_options().name_of(m.data.source),
               "remove eval.coverage");
      for (const MethodSection& method : m.methods) {
        r.expect(method.attention.pattern().reports_coverage_curve() || (coverage->block_size > 0 && coverage->top_k > 0),
                 "eval",
                 "has \"coverage\" without block_size and top_k, and method \"" + method.name +
                     "\" has dense attention, so there is no MoBA block size to route with",
                 "set eval.coverage.block_size and eval.coverage.top_k");
      }
    }
  }
  if (const json* cluster = r.optional_value("cluster")) {
    m.cluster = parse_cluster_section(*cluster, r.child_path("cluster"), file);
  }
  if (const json* simulation = r.optional_value("simulation")) {
    m.simulation = parse_simulation_section(*simulation, r.child_path("simulation"), file,
                                            m.cluster ? &*m.cluster : nullptr);
  }
  r.expect(m.methods.empty() || names.count(m.baseline) == 1, "baseline",
           "names no method (\"" + m.baseline + "\")", "use the name of one of the methods");
  r.finish();
  const bool simulation_profile = m.simulation && m.simulation->profile.source != SimProfileSource::kMethod;
  for (size_t i = 0; i < m.methods.size(); ++i) {
    check_method_profile(m.methods[i], "$.methods[" + std::to_string(i) + "]", file, simulation_profile);
  }
  r.expect(!m.methods.empty(), "methods", "must list at least one method",
           "add {\"name\": \"dense\"}");
  if (m.data.source == DataSource::kSynthetic) {
    // JSONL data is checked when it is tokenized, before training starts.
    const int64_t longest = synthetic_longest_length(m.data.synthetic);
    const std::string where = "$.data.synthetic";
    if (longest > qwen2_position_limit(model)) {
      throw ConfigError(file, where,
                        "sequences up to " + std::to_string(longest) + " tokens exceed the model's " +
                            std::to_string(qwen2_position_limit(model)) + " positions",
                        "lower the lengths (or length_scale) or use a model with more positions");
    }
    if (longest > m.train.max_tokens_per_microbatch) {
      throw ConfigError(file, "$.train.max_tokens_per_microbatch",
                        "is smaller than the longest sequence (" + std::to_string(longest) +
                            " tokens), which could never be scheduled",
                        "raise it to at least " + std::to_string(longest));
    }
  }
  if (!m.sweep.empty()) {
    // Counted before any grid point is built: a grid of millions must not fill memory.
    const long double runs = count_runs(m);
    if (runs > static_cast<long double>(m.max_runs)) {
      char count[64];
      std::snprintf(count, sizeof(count), "%.0Lf", runs);
      throw ConfigError(file, "$.sweep",
                        "expands to " + std::string(count) + " runs, more than max_runs (" +
                            std::to_string(m.max_runs) + ")",
                        "sweep fewer values, or raise \"max_runs\" at the manifest's top level if you mean it");
    }
    expand_runs(m);  // every grid point must parse: fail now, not mid-sweep
  }
  return m;
}

DatasetLimits dataset_limits(const Manifest& manifest) {
  return {manifest.model.config.vocab_size, manifest.train.max_tokens_per_microbatch,
          qwen2_position_limit(manifest.model.config)};
}

Manifest load_manifest(const std::filesystem::path& path, const std::vector<ManifestOverride>& overrides) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) {
    throw ConfigError(path.string(), "", "is a folder, not a manifest file",
                      "pass a manifest's JSON file, e.g. experiments/quickstart.json");
  }
  std::string text;
  try {
    text = read_file(path);
  } catch (const std::exception& e) {
    throw ConfigError(path.string(), "", e.what(), "check the manifest path");
  }
  json j = parse_strict_json(text, path.string());
  const std::vector<std::string> set_paths = apply_manifest_overrides(j, overrides);
  try {
    return parse_manifest(j, path.string());
  } catch (const ConfigError& e) {
    // The last --set that covers the path gave the value (a later one overrides an earlier).
    for (size_t i = set_paths.size(); i-- > 0;) {
      const std::string& set = set_paths[i];
      const std::string& at = e.json_path();
      const bool below = at.rfind(set, 0) == 0 && (at.size() == set.size() || at[set.size()] == '.' ||
                                                   at[set.size()] == '[' || at[set.size()] == ' ');
      if (below) {
        throw ConfigError(e.file(), e.json_path(),
                          e.problem() + " (the value comes from --set " + overrides[i].argument + ")", e.fix());
      }
    }
    throw;
  }
}

namespace {

json data_to_json(const DataSection& d) {
  if (d.source == DataSource::kJsonl) {
    return {{"source", "jsonl"},
            {"jsonl",
             {{"path", d.jsonl.path},
              {"tokenizer", d.jsonl.tokenizer},
              {"too_long", too_long_options().name_of(d.jsonl.too_long)},
              {"shuffle", d.jsonl.shuffle}}}};
  }
  if (d.source == DataSource::kTokenized) {
    return {{"source", "tokenized"},
            {"tokenized",
             {{"path", d.tokenized.path},
              {"too_long", too_long_options().name_of(d.tokenized.too_long)},
              {"shuffle", d.tokenized.shuffle}}}};
  }
  const SyntheticDataSection& s = d.synthetic;
  json synthetic{{"task", synthetic_task_options().name_of(s.task)}, {"vocab_size", s.vocab_size}, {"lengths", s.lengths_name()},
                 {"length_scale", s.length_scale}};
  if (s.task == SyntheticTask::kArithmetic) {
    synthetic["prompt_tokens"] = s.prompt_tokens;
    synthetic["max_stride"] = s.max_stride;
  } else if (s.task == SyntheticTask::kRetrieval) {
    synthetic["key_tokens"] = s.key_tokens;
    synthetic["answer_tokens"] = s.answer_tokens;
  } else {
    synthetic["lag"] = s.lag;
  }
  if (s.lengths == LengthSource::kMixture) {
    json mixture = json::array();
    for (const auto& c : s.length_mixture) {
      mixture.push_back({{"weight", c.weight}, {"min_tokens", c.min_tokens}, {"max_tokens", c.max_tokens}});
    }
    synthetic["length_mixture"] = mixture;
  } else if (s.lengths == LengthSource::kFile) {
    synthetic["length_file"] = s.length_file;
  }
  return {{"source", "synthetic"}, {"synthetic", synthetic}};
}

}  // namespace

json model_section_to_json(const ModelSection& model) {
  json j = json::object();
  if (!model.preset.empty()) j["preset"] = model.preset;
  if (model.pretrained()) j["from"] = model.from;
  if (!model.rope_scaling.is_null()) j["rope_scaling"] = model.rope_scaling;
  return j;
}

json manifest_to_json(const Manifest& m) {
  json methods = json::array();
  for (const auto& method : m.methods) methods.push_back(method_to_json(method));
  const auto& t = m.train;
  json train = {{"device", t.device_name()},
                {"iterations", t.iterations},
                {"warmup_iterations", t.warmup_iterations},
                {"global_batch_size", t.global_batch_size},
                {"max_tokens_per_microbatch", t.max_tokens_per_microbatch},
                {"max_samples_per_microbatch", t.max_samples_per_microbatch},
                {"lr", t.lr},
                {"lr_warmup_fraction", t.lr_warmup_fraction},
                {"min_lr_ratio", t.min_lr_ratio},
                {"weight_decay", t.weight_decay},
                {"grad_clip", t.grad_clip},
                {"adam_beta1", t.adam_beta1},
                {"adam_beta2", t.adam_beta2},
                {"adam_eps", t.adam_eps},
                {"threads", t.threads},
                {"lr_schedule", lr_schedule_options().name_of(t.lr_schedule)},
                {"activation_checkpointing", t.activation_checkpointing},
                {"precision", qwen2_precision_name(t.precision)}};
  // Absent means full fine-tuning; there is no default adapter to write out.
  // Written only when set, so earlier runs' manifests resolve as before.
  if (t.collectives != TrainCollectives::kAuto) train["collectives"] = train_collectives_options().name_of(t.collectives);
  if (t.nonfinite != NonFinitePolicy::kStop) train["nonfinite"] = nonfinite_options().name_of(t.nonfinite);
  if (t.lora) {
    train["lora"] = {{"rank", t.lora->rank},
                     {"alpha", t.lora->alpha},
                     {"dropout", t.lora->dropout},
                     {"target_modules", t.lora->target_modules}};
  }
  json resolved{
      {"name", m.name},
      {"description", m.description},
      {"seed", m.seed},
      {"model", model_section_to_json(m.model)},
      {"data", data_to_json(m.data)},
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
      {"train", train},
      {"methods", methods},
      {"baseline", m.baseline},
  };
  if (m.parallelism.tp != 1) resolved["parallelism"]["tp"] = m.parallelism.tp;
  if (m.parallelism.cp != 1) {  // written only when used, so earlier runs' manifests resolve as before
    resolved["parallelism"]["cp"] = m.parallelism.cp;
    resolved["parallelism"]["cp_layout"] = m.parallelism.cp_layout.name();
    resolved["parallelism"]["cp_stripe_tokens"] = m.parallelism.cp_layout.stripe_tokens;
    resolved["parallelism"]["cp_inner"] = m.parallelism.cp_inner;
  }
  if (m.cluster) resolved["cluster"] = cluster_section_to_json(*m.cluster);
  if (m.simulation) resolved["simulation"] = simulation_section_to_json(*m.simulation);
  if (!m.sweep.empty()) {
    json sweep = json::object();
    for (const SweepAxis& axis : m.sweep) sweep[axis.path] = axis.values;
    resolved["sweep"] = sweep;
  }
  if (m.eval) resolved["eval"] = eval_spec_to_json(*m.eval);
  return resolved;
}

namespace {

// The manifest narrowed to one method (which becomes its own baseline, so that the
// narrowed manifest is valid on its own), without the sweep.
Manifest narrow_to_method(const Manifest& manifest, const MethodSection& method) {
  Manifest narrowed = manifest;
  narrowed.methods = {method};
  narrowed.baseline = method.name;
  narrowed.sweep.clear();
  return narrowed;
}

}  // namespace

namespace {

// The sweep axes that apply to `method` (sweep.h): every axis outside "methods.", and
// those inside it that the method's resolved form has.
std::vector<size_t> axes_of_method(const Manifest& manifest, const MethodSection& method) {
  const std::string method_prefix = "methods.";
  const json method_json = method_to_json(method);
  std::vector<size_t> axes;
  for (size_t a = 0; a < manifest.sweep.size(); ++a) {
    const std::string& path = manifest.sweep[a].path;
    if (path.rfind(method_prefix, 0) != 0 || has_json_path(method_json, path.substr(method_prefix.size()))) {
      axes.push_back(a);
    }
  }
  return axes;
}

}  // namespace

long double count_runs(const Manifest& manifest) {
  long double runs = 0;
  for (const MethodSection& method : manifest.methods) {
    long double points = 1;
    for (size_t a : axes_of_method(manifest, method)) points *= static_cast<long double>(manifest.sweep[a].values.size());
    runs += points;
  }
  return runs;
}

std::vector<RunSpec> expand_runs(const Manifest& manifest) {
  std::vector<RunSpec> runs;
  if (manifest.sweep.empty()) {
    for (const auto& method : manifest.methods) {
      RunSpec run;
      run.name = method.name;
      run.manifest = narrow_to_method(manifest, method);
      run.is_baseline = method.name == manifest.baseline;
      run.method = method.name;
      run.baseline_method = manifest.baseline;
      runs.push_back(std::move(run));
    }
    return runs;
  }
  const std::vector<std::string> labels = sweep_labels(manifest.sweep);
  const std::string method_prefix = "methods.";
  std::map<std::string, json> points_of_names;  // run name -> its sweep point
  for (size_t i = 0; i < manifest.methods.size(); ++i) {
    const std::vector<size_t> axes = axes_of_method(manifest, manifest.methods[i]);
    // Odometer over the applicable axes, the last one fastest.
    std::vector<size_t> digit(axes.size(), 0);
    while (true) {
      json point = manifest.source;
      point.erase("sweep");
      json point_values = json::object();
      std::string name = manifest.methods[i].name;
      for (size_t d = 0; d < axes.size(); ++d) {
        const SweepAxis& axis = manifest.sweep[axes[d]];
        const json& value = axis.values[digit[d]];
        try {
          if (axis.path.rfind(method_prefix, 0) == 0) {
            set_json_path(point["methods"][i], axis.path.substr(method_prefix.size()), value);
          } else {
            set_json_path(point, axis.path, value);
          }
        } catch (const std::invalid_argument& e) {
          throw ConfigError(manifest.file, "$.sweep[\"" + axis.path + "\"]", e.what(), "fix the path");
        }
        point_values[axis.path] = value;
        name += "__" + labels[axes[d]] + "=" + sweep_value_text(value);
      }
      point["methods"] = json::array({point["methods"][i]});
      point["baseline"] = manifest.methods[i].name;
      Manifest parsed;
      try {
        parsed = parse_manifest(point, manifest.file);
      } catch (const ConfigError& e) {
        throw ConfigError(e.file(), e.json_path(),
                          e.problem() + " (in the sweep point " + point_values.dump() + " of run " + name + ")",
                          e.fix());
      }
      if (const auto [earlier, fresh] = points_of_names.emplace(name, point_values); !fresh) {
        throw ConfigError(manifest.file, "$.sweep",
                          "names two runs \"" + name + "\": the sweep points " + earlier->second.dump() + " and " +
                              point_values.dump() + (earlier->second == point_values ? " of two methods" : ""),
                          "rename the method whose name looks like a swept run, or sweep values that name "
                          "their runs apart");
      }
      RunSpec run;
      run.name = name;
      run.manifest = parsed;
      run.sweep_point = point_values;
      run.is_baseline = manifest.methods[i].name == manifest.baseline;
      run.method = manifest.methods[i].name;
      run.baseline_method = manifest.baseline;
      runs.push_back(std::move(run));
      size_t d = axes.size();
      while (d > 0 && ++digit[d - 1] == manifest.sweep[axes[d - 1]].values.size()) digit[--d] = 0;
      if (d == 0) break;
    }
  }
  return runs;
}

}  // namespace sb
