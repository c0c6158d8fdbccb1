#include "harness/latency/latency_profile.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include "common/errors.h"
#include "common/statistics.h"
#include "harness/common/atomic_file.h"
#include "harness/common/json_object_reader.h"

namespace sb {
namespace {

const char* kFormat = "sparsebalance-latency-profile";
constexpr int64_t kVersion = 1;

nlohmann::json stat_table_to_json(const std::vector<LatencyStat>& row) {
  nlohmann::json median = nlohmann::json::array(), spread = nlohmann::json::array(),
                 samples = nlohmann::json::array();
  for (const LatencyStat& s : row) {
    median.push_back(s.median);
    spread.push_back(s.spread);
    samples.push_back(s.samples);
  }
  return {{"median", median}, {"spread", spread}, {"samples", samples}};
}

std::vector<double> read_numbers(const nlohmann::json& value, const std::string& path,
                                 const std::string& file) {
  std::vector<double> out;
  for (size_t i = 0; i < expect_json_array(value, path, file).size(); ++i) {
    const auto& v = value[i];
    if (!v.is_number()) {
      throw ConfigError(file, path + "[" + std::to_string(i) + "]", "expected a number, got " + v.dump());
    }
    out.push_back(v.get<double>());
  }
  return out;
}

// {"median": [n], "spread": [n], "samples": [n][reps]} -> n stats.
std::vector<LatencyStat> read_stat_row(const nlohmann::json& value, const std::string& path,
                                       const std::string& file, size_t expected) {
  JsonObjectReader r(value, path, file);
  const std::vector<double> median = read_numbers(r.required_value("median"), r.child_path("median"), file);
  const std::vector<double> spread = read_numbers(r.required_value("spread"), r.child_path("spread"), file);
  const nlohmann::json* samples = r.optional_value("samples");
  r.finish();
  if (median.size() != expected || spread.size() != expected) {
    throw ConfigError(file, path, "expected " + std::to_string(expected) + " entries in median and spread",
                      "regenerate the profile with `sparsebalance profile`");
  }
  std::vector<LatencyStat> row(expected);
  for (size_t i = 0; i < expected; ++i) {
    row[i].median = median[i];
    row[i].spread = spread[i];
  }
  if (samples != nullptr) {
    const std::string samples_path = r.child_path("samples");
    if (expect_json_array(*samples, samples_path, file).size() != expected) {
      throw ConfigError(file, samples_path, "expected " + std::to_string(expected) + " lists");
    }
    for (size_t i = 0; i < expected; ++i) {
      row[i].samples = read_numbers((*samples)[i], samples_path + "[" + std::to_string(i) + "]", file);
    }
  }
  return row;
}

std::vector<int64_t> read_grid(JsonObjectReader& r, const std::string& key) {
  std::vector<int64_t> out;
  const nlohmann::json& value = r.required_value(key);
  for (size_t i = 0; i < expect_json_array(value, r.child_path(key), r.file()).size(); ++i) {
    out.push_back(r.convert<int64_t>(value[i], r.child_path(key) + "[" + std::to_string(i) + "]"));
  }
  return out;
}

void check_ascending(const std::vector<int64_t>& grid, const std::string& name, int64_t lowest) {
  for (size_t i = 0; i < grid.size(); ++i) {
    if (grid[i] < lowest) {
      throw std::invalid_argument("latency profile: " + name + "[" + std::to_string(i) +
                                  "] = " + std::to_string(grid[i]) + " is below " +
                                  std::to_string(lowest));
    }
    if (i > 0 && grid[i] <= grid[i - 1]) {
      throw std::invalid_argument("latency profile: " + name + " must be strictly ascending");
    }
  }
}

void check_stat(const LatencyStat& s, const std::string& where) {
  if (!std::isfinite(s.median) || s.median < 0 || !std::isfinite(s.spread) || s.spread < 0) {
    throw std::invalid_argument("latency profile: " + where + " has a negative or non-finite latency");
  }
}

// "training" of a profile written before it existed: how such profiles were measured
// (full fine-tuning, no checkpointing), at the precision their context recorded.
LatencyProfileTraining training_of_older_profile(const nlohmann::json& context, const std::string& file) {
  LatencyProfileTraining training;
  const auto precision = context.find("precision");
  if (precision == context.end()) return training;
  try {
    training.precision = qwen2_precision_from_name(precision->is_string() ? precision->get<std::string>() : precision->dump());
  } catch (const std::invalid_argument& e) {
    throw ConfigError(file, "$.context.precision", e.what(), "regenerate the profile with `sparsebalance profile`");
  }
  return training;
}

}  // namespace

std::string latency_profile_lora_text(const std::optional<Qwen2LoraOptions>& lora) {
  if (!lora) return "full fine-tuning";
  std::string targets;
  for (const std::string& name : lora->target_modules) targets += (targets.empty() ? "" : ", ") + name;
  return "LoRA rank " + std::to_string(lora->rank) + " on " + targets;
}

std::string latency_profile_training_text(const LatencyProfileTraining& training) {
  return qwen2_precision_name(training.precision) + ", " +
         (training.activation_checkpointing ? "activation checkpointing" : "no activation checkpointing") + ", " +
         latency_profile_lora_text(training.lora) +
         (training.tensor_parallel > 1 ? ", one of " + std::to_string(training.tensor_parallel) + " TP ranks" +
                                             (training.tensor_parallel_collectives.empty()
                                                  ? " without its collectives"
                                                  : " with its " + training.tensor_parallel_collectives + " collectives")
                                       : "") +
         (training.context_parallel > 1 ? ", one CP micro-batch on " + std::to_string(training.context_parallel) +
                                               " " + training.cp_layout.name() + " CP ranks over " +
                                               training.context_parallel_collectives
                                         : "");
}

nlohmann::json latency_profile_training_to_json(const LatencyProfileTraining& training) {
  nlohmann::json lora;  // null: full fine-tuning
  if (training.lora) {
    lora = {{"rank", training.lora->rank},
            {"alpha", training.lora->alpha},
            {"dropout", training.lora->dropout},
            {"target_modules", training.lora->target_modules}};
  }
  nlohmann::json j = {{"precision", qwen2_precision_name(training.precision)},
                      {"activation_checkpointing", training.activation_checkpointing},
                      {"lora", lora}};
  if (training.tensor_parallel > 1) j["tensor_parallel"] = training.tensor_parallel;
  if (training.tensor_parallel > 1 && !training.tensor_parallel_collectives.empty()) {
    j["tensor_parallel_collectives"] = training.tensor_parallel_collectives;
  }
  if (training.context_parallel > 1) {
    j["context_parallel"] = {{"size", training.context_parallel},
                             {"layout", training.cp_layout.name()},
                             {"stripe_tokens", training.cp_layout.stripe_tokens},
                             {"inner", training.cp_inner},
                             {"collectives", training.context_parallel_collectives}};
  }
  return j;
}

LatencyProfileTraining latency_profile_training_from_json(const nlohmann::json& json, const std::string& path,
                                                          const std::string& file) {
  JsonObjectReader r(json, path, file);
  LatencyProfileTraining training;
  training.precision = qwen2_precision_from_name(
      r.optional_choice("precision", qwen2_precision_name(training.precision), qwen2_precision_names()));
  training.activation_checkpointing = r.optional<bool>("activation_checkpointing", false);
  training.tensor_parallel = r.optional<int64_t>("tensor_parallel", 1);
  training.tensor_parallel_collectives = r.optional_choice("tensor_parallel_collectives", "", {"gloo", "nccl"});
  const nlohmann::json* lora = r.optional_value("lora");
  if (const nlohmann::json* cp = r.optional_value("context_parallel")) {
    JsonObjectReader c(*cp, r.child_path("context_parallel"), file);
    training.context_parallel = c.required<int64_t>("size");
    training.cp_layout.kind = c.required_option("layout", cp_layout_options());
    training.cp_layout.stripe_tokens = c.optional<int64_t>("stripe_tokens", training.cp_layout.stripe_tokens);
    training.cp_inner = c.optional<int64_t>("inner", 0);
    training.context_parallel_collectives = c.optional_choice("collectives", "gloo", {"gloo", "nccl"});
    c.finish();
    c.expect(training.context_parallel > 1, "size", "must be > 1 (leave context_parallel out for one rank)",
             "regenerate the profile with `sparsebalance profile`");
    c.expect(training.cp_layout.stripe_tokens >= 1 && training.cp_inner >= 0, "stripe_tokens",
             "stripe_tokens must be >= 1 and inner >= 0", "regenerate the profile with `sparsebalance profile`");
  }
  r.finish();
  r.expect(training.tensor_parallel >= 1, "tensor_parallel", "must be >= 1", "regenerate the profile with `sparsebalance profile`");
  r.expect(training.tensor_parallel > 1 || training.tensor_parallel_collectives.empty(), "tensor_parallel_collectives",
           "is given without tensor_parallel > 1", "regenerate the profile with `sparsebalance profile`");
  if (lora == nullptr || lora->is_null()) return training;
  JsonObjectReader l(*lora, r.child_path("lora"), file);
  Qwen2LoraOptions options;
  options.rank = l.required<int64_t>("rank");
  options.alpha = l.required<double>("alpha");
  options.dropout = l.optional<double>("dropout", 0.0);
  const std::string targets_path = l.child_path("target_modules");
  const nlohmann::json& targets = expect_json_array(l.required_value("target_modules"), targets_path, file);
  for (size_t i = 0; i < targets.size(); ++i) {
    options.target_modules.push_back(l.convert<std::string>(targets[i], targets_path + "[" + std::to_string(i) + "]"));
  }
  l.finish();
  try {
    qwen2_validate_lora_options(options);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(file, r.child_path("lora"), e.what(), "regenerate the profile with `sparsebalance profile`");
  }
  training.lora = std::move(options);
  return training;
}

LatencyStat latency_stat_from_samples(std::vector<double> samples) {
  if (samples.empty()) throw std::invalid_argument("latency_stat_from_samples: no samples");
  std::vector<double> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  LatencyStat stat;
  stat.median = quantile_of_sorted(sorted, 0.5);
  stat.spread = quantile_of_sorted(sorted, 0.75) - quantile_of_sorted(sorted, 0.25);
  stat.samples = std::move(samples);
  return stat;
}

void LatencyProfile::validate() const {
  if (kind != "measured" && kind != "analytic") {
    throw std::invalid_argument("latency profile: kind must be \"measured\" or \"analytic\"");
  }
  if (seq_lens.size() < 2) {
    throw std::invalid_argument("latency profile: needs at least 2 sequence lengths to interpolate");
  }
  if (budgets.empty()) throw std::invalid_argument("latency profile: needs at least 1 budget");
  check_ascending(seq_lens, "seq_lens", 1);
  check_ascending(budgets, "budgets", 0);
  if (layer_ms.size() != seq_lens.size() || rest_ms.size() != seq_lens.size() ||
      head_ms.size() != seq_lens.size()) {
    throw std::invalid_argument("latency profile: layer_ms, rest_ms and head_ms need one entry per sequence length");
  }
  for (size_t i = 0; i < seq_lens.size(); ++i) {
    if (layer_ms[i].size() != budgets.size()) {
      throw std::invalid_argument("latency profile: layer_ms[" + std::to_string(i) +
                                  "] needs one entry per budget");
    }
    for (size_t j = 0; j < budgets.size(); ++j) {
      check_stat(layer_ms[i][j], "layer_ms[" + std::to_string(i) + "][" + std::to_string(j) + "]");
    }
    check_stat(rest_ms[i], "rest_ms[" + std::to_string(i) + "]");
    check_stat(head_ms[i], "head_ms[" + std::to_string(i) + "]");
  }
  if (!model_ms.empty()) {
    if (model_ms.size() != seq_lens.size()) {
      throw std::invalid_argument("latency profile: model_ms needs one entry per sequence length");
    }
    for (size_t i = 0; i < model_ms.size(); ++i) check_stat(model_ms[i], "model_ms[" + std::to_string(i) + "]");
    if (std::find(budgets.begin(), budgets.end(), model_budget) == budgets.end()) {
      throw std::invalid_argument("latency profile: model_budget " + std::to_string(model_budget) +
                                  " is not one of the profiled budgets");
    }
  }
  if (packed_ms) {
    check_stat(*packed_ms, "packed_ms");
    if (packed_count < 2) {
      throw std::invalid_argument("latency profile: packed_count must be >= 2 (sequences in packed_ms), got " +
                                  std::to_string(packed_count));
    }
  }
}

nlohmann::json latency_profile_model_json(const Qwen2Config& config) {
  return {{"preset", config.name},
          {"hidden_size", config.hidden_size},
          {"intermediate_size", config.intermediate_size},
          {"num_hidden_layers", config.num_hidden_layers},
          {"num_attention_heads", config.num_attention_heads},
          {"num_key_value_heads", config.num_key_value_heads},
          {"head_dim", config.head_dim},
          {"vocab_size", config.vocab_size}};
}

nlohmann::json latency_profile_architecture(const nlohmann::json& model) {
  nlohmann::json architecture = nlohmann::json::object();
  if (!model.is_object()) return architecture;
  for (const auto& [key, value] : model.items()) {
    if (key != "preset" && key != "from") architecture[key] = value;
  }
  return architecture;
}

nlohmann::json latency_profile_attention_json(const LatencyProfile& p) {
  nlohmann::json attention{{"name", p.attention}, {"block_size", p.block_size()}};
  for (const auto& [field, value] : p.attention_fields) attention[field] = value;
  return attention;
}

int64_t LatencyProfile::block_size() const {
  const auto it = attention_fields.find("block_size");
  return it != attention_fields.end() ? it->second : 0;
}

nlohmann::json latency_profile_to_json(const LatencyProfile& p) {
  nlohmann::json layer_median = nlohmann::json::array(), layer_spread = nlohmann::json::array(),
                 layer_samples = nlohmann::json::array();
  for (const auto& row : p.layer_ms) {
    const nlohmann::json r = stat_table_to_json(row);
    layer_median.push_back(r["median"]);
    layer_spread.push_back(r["spread"]);
    layer_samples.push_back(r["samples"]);
  }
  nlohmann::json j = {{"format", kFormat},
          {"version", kVersion},
          {"kind", p.kind},
          {"model", p.model},
          {"attention", latency_profile_attention_json(p)},
          {"device", p.device},
          {"training", latency_profile_training_to_json(p.training)},
          {"warmup", p.warmup},
          {"repetitions", p.repetitions},
          {"seq_lens", p.seq_lens},
          {"budgets", p.budgets},
          {"layer_ms", {{"median", layer_median}, {"spread", layer_spread}, {"samples", layer_samples}}},
          {"rest_ms", stat_table_to_json(p.rest_ms)},
          {"head_ms", stat_table_to_json(p.head_ms)},
          {"context", p.context}};
  if (!p.model_ms.empty()) {
    j["model_ms"] = stat_table_to_json(p.model_ms);
    j["model_budget"] = p.model_budget;
  }
  if (p.packed_ms) {
    j["packed_ms"] = stat_table_to_json({*p.packed_ms});
    j["packed_count"] = p.packed_count;
  }
  return j;
}

LatencyProfile latency_profile_from_json(const nlohmann::json& json, const std::string& file) {
  JsonObjectReader r(json, "$", file);
  const std::string format = r.required<std::string>("format");
  r.expect(format == kFormat, "format", "is \"" + format + "\", not a latency profile",
           "pass a file written by `sparsebalance profile`");
  const int64_t version = r.required<int64_t>("version");
  r.expect(version == kVersion, "version", "unsupported version " + std::to_string(version),
           "regenerate the profile with this build's `sparsebalance profile`");
  LatencyProfile p;
  p.kind = r.optional_choice("kind", "measured", {"measured", "analytic"});
  if (const nlohmann::json* model = r.optional_value("model")) p.model = *model;
  {
    JsonObjectReader a(r.required_value("attention"), r.child_path("attention"), file);
    p.attention = a.required<std::string>("name");
    // The pattern's fields, integers each (which ones is the pattern's to say).
    for (const auto& [field, value] : r.required_value("attention").items()) {
      if (field != "name") p.attention_fields[field] = a.required<int64_t>(field);
    }
    if (!p.attention_fields.count("block_size")) p.attention_fields["block_size"] = 0;
    a.finish();
  }
  p.device = r.optional<std::string>("device", "cpu");
  const nlohmann::json* training = r.optional_value("training");
  p.warmup = r.optional<int64_t>("warmup", 0);
  p.repetitions = r.optional<int64_t>("repetitions", 0);
  p.seq_lens = read_grid(r, "seq_lens");
  p.budgets = read_grid(r, "budgets");
  const size_t n = p.seq_lens.size();
  {
    const std::string path = r.child_path("layer_ms");
    JsonObjectReader t(r.required_value("layer_ms"), path, file);
    const nlohmann::json& median = t.required_value("median");
    const nlohmann::json& spread = t.required_value("spread");
    const nlohmann::json* samples = t.optional_value("samples");
    t.finish();
    if (expect_json_array(median, path + ".median", file).size() != n ||
        expect_json_array(spread, path + ".spread", file).size() != n ||
        (samples != nullptr && expect_json_array(*samples, path + ".samples", file).size() != n)) {
      throw ConfigError(file, path, "needs one row per sequence length (" + std::to_string(n) + ")",
                        "regenerate the profile with `sparsebalance profile`");
    }
    for (size_t i = 0; i < n; ++i) {
      nlohmann::json row{{"median", median[i]}, {"spread", spread[i]}};
      if (samples != nullptr) row["samples"] = (*samples)[i];
      p.layer_ms.push_back(read_stat_row(row, path + "[" + std::to_string(i) + "]", file, p.budgets.size()));
    }
  }
  p.rest_ms = read_stat_row(r.required_value("rest_ms"), r.child_path("rest_ms"), file, n);
  p.head_ms = read_stat_row(r.required_value("head_ms"), r.child_path("head_ms"), file, n);
  if (const nlohmann::json* model_ms = r.optional_value("model_ms")) {
    p.model_ms = read_stat_row(*model_ms, r.child_path("model_ms"), file, n);
    p.model_budget = r.required<int64_t>("model_budget");
  }
  if (const nlohmann::json* packed = r.optional_value("packed_ms")) {
    p.packed_ms = read_stat_row(*packed, r.child_path("packed_ms"), file, 1).at(0);
    p.packed_count = r.required<int64_t>("packed_count");
  }
  if (const nlohmann::json* context = r.optional_value("context")) p.context = *context;
  r.finish();
  p.training = training != nullptr ? latency_profile_training_from_json(*training, r.child_path("training"), file)
                                   : training_of_older_profile(p.context, file);
  try {
    p.validate();
  } catch (const std::invalid_argument& e) {
    throw ConfigError(file, "$", e.what(), "regenerate the profile with `sparsebalance profile`");
  }
  return p;
}

int64_t LatencyProfile::measured_threads() const {
  const auto it = context.find("intra_op_threads");
  if (it == context.end() || !it->is_number_integer()) return 0;
  return std::max<int64_t>(0, it->get<int64_t>());
}

LatencyProfile load_latency_profile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) {
    throw ConfigError(path.string(), "", "cannot be opened",
                      "check the path, or create it with `sparsebalance profile --out`");
  }
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(path.string(), "", std::string("invalid JSON: ") + e.what());
  }
  return latency_profile_from_json(json, path.string());
}

void save_latency_profile(const LatencyProfile& profile, const std::filesystem::path& path) {
  profile.validate();
  write_file_atomic(path, latency_profile_to_json(profile).dump(1) + "\n");
}

}  // namespace sb
