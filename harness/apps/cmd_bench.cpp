// sparsebalance bench attention: times attention patterns on one shape, side by side when
// --impl lists several, and prints a table (or one JSON object per impl). An --impl entry
// is a pattern's name, one of its bench variants ("moba-fused", "dense-flash"), or
// "ring-<pattern>[-<variant>]" (the context-parallel ring on one rank, with a variant that
// changes the selection, as "ring-moba-token"); each pattern says which
// manifest keys the bench's flags set (harness/patterns).

#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>
#include <optional>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "common/errors.h"
#include "common/statistics.h"
#include "harness/apps/commands.h"
#include "harness/common/system_info.h"
#include "harness/patterns/attention_patterns.h"
#include "kernels/attention/attention_benchmark.h"

namespace sb::cli {
namespace {

struct BenchAttentionFlags {
  std::string impl = "moba";
  std::string device = "cpu";
  std::string dtype;  // default: float32 on cpu, bfloat16 on cuda
  std::string heads = "4/2";
  int64_t seq_len = 8192, block = 64, top_k = 8, head_dim = 64;
  int64_t vs_verticals = 1000, vs_slashes = 2000, vs_block = 64;
  double vs_p = 0.0;
  std::string inputs = "random";
  int64_t repetitions = 5, warmup = 1, threads = 0, check_rows = 0;
  uint64_t seed = 0;
  bool backward = false, json = false;
};

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, separator)) parts.push_back(item);
  return parts;
}

// The --dtype names, in both directions.
const std::vector<std::pair<std::string, at::ScalarType>>& dtype_names() {
  static const std::vector<std::pair<std::string, at::ScalarType>> names{
      {"float32", at::kFloat}, {"float64", at::kDouble}, {"bfloat16", at::kBFloat16},
      {"float16", at::kHalf}};
  return names;
}

at::ScalarType parse_dtype(const std::string& name) {
  for (const auto& [text, dtype] : dtype_names()) {
    if (text == name) return dtype;
  }
  throw ConfigError("--dtype", "", "unknown dtype \"" + name + "\"",
                    "use float32, float64, bfloat16 or float16");
}

std::string dtype_name(at::ScalarType dtype) {
  for (const auto& [text, d] : dtype_names()) {
    if (d == dtype) return text;
  }
  throw std::logic_error("bench attention: no name for dtype " + std::string(c10::toString(dtype)));
}

// The bench's flags as the patterns read them (AttentionPatternPlugin::bench_keys).
nlohmann::json bench_flag_values(const BenchAttentionFlags& f) {
  return {{"block", f.block},          {"top_k", f.top_k},       {"vs_verticals", f.vs_verticals},
          {"vs_slashes", f.vs_slashes}, {"vs_block", f.vs_block}, {"vs_p", f.vs_p}};
}

// Every --impl entry this build knows, for messages.
std::string known_impls() {
  std::string names;
  const auto add = [&names](const std::string& name) { names += (names.empty() ? "" : ", ") + name; };
  for (const AttentionPatternPlugin* plugin : attention_plugins()) {
    add(plugin->name());
    for (const AttentionBenchVariant& variant : plugin->bench_variants()) add(plugin->name() + "-" + variant.suffix);
    if (!plugin->make_default().pattern().make_ring_selector()) continue;
    add("ring-" + plugin->name());
    for (const AttentionBenchVariant& variant : plugin->bench_variants()) {  // a variant of the selection rides the ring
      if (!variant.cuda_only && !variant.sdpa_flash_only) add("ring-" + plugin->name() + "-" + variant.suffix);
    }
  }
  return names;
}

// One --impl entry: its pattern (with the bench flags' keys and the variant's), the ring or not.
void resolve_impl(const BenchAttentionFlags& f, const std::string& impl, AttentionBenchConfig& c) {
  std::string name = impl;
  if (name.rfind("ring-", 0) == 0) {
    c.ring = true;
    name = name.substr(5);
  }
  const AttentionPatternPlugin* plugin = nullptr;
  std::optional<AttentionBenchVariant> variant;
  for (const AttentionPatternPlugin* p : attention_plugins()) {
    if (p->name() == name) plugin = p;
  }
  for (const AttentionPatternPlugin* p : attention_plugins()) {
    if (plugin != nullptr || name.rfind(p->name() + "-", 0) != 0) continue;
    for (const AttentionBenchVariant& v : p->bench_variants()) {
      // The ring takes the variants that change the selection, not a device path.
      if (name != p->name() + "-" + v.suffix || (c.ring && (v.cuda_only || v.sdpa_flash_only))) continue;
      plugin = p;
      variant = v;
    }
  }
  if (plugin == nullptr) {
    throw ConfigError("--impl", "", "unknown implementation \"" + impl + "\"", "use one of " + known_impls() + ", or a comma list");
  }
  nlohmann::json object{{"name", plugin->name()}};
  std::map<std::string, std::string> flag_of_key;
  for (const AttentionBenchKey& key : plugin->bench_keys(bench_flag_values(f))) {
    object[key.key] = key.value;
    flag_of_key[key.key] = key.flag;
  }
  if (variant) {
    for (const auto& [key, value] : variant->keys.items()) object[key] = value;
    c.sdpa_flash_only = variant->sdpa_flash_only;
    c.cuda_only = variant->cuda_only;
  }
  try {
    c.attention = parse_attention(object, "$.attention", "--impl " + impl);
  } catch (const ConfigError& e) {
    const std::string key = e.json_path().substr(e.json_path().find_last_of('.') + 1);
    const auto flag = flag_of_key.find(key);
    throw ConfigError(flag != flag_of_key.end() ? flag->second : "--impl", "", e.problem(), e.fix());
  }
  if (c.ring && !c.attention.pattern().make_ring_selector()) {
    throw ConfigError("--impl", "", impl + ": " + plugin->name() + " has no context-parallel ring",
                      "use one of " + known_impls());
  }
}

AttentionBenchConfig config_from(const BenchAttentionFlags& f, const std::string& impl) {
  AttentionBenchConfig c;
  c.impl = impl;
  c.device = f.device;
  c.dtype = parse_dtype(f.dtype.empty() ? (f.device == "cuda" ? "bfloat16" : "float32") : f.dtype);
  c.seq_len = f.seq_len;
  resolve_impl(f, impl, c);
  c.inputs = f.inputs;
  const auto heads = split(f.heads, '/');
  try {
    if (heads.size() != 2) throw std::invalid_argument(f.heads);
    c.q_heads = std::stoll(heads[0]);
    c.kv_heads = std::stoll(heads[1]);
  } catch (const std::exception&) {
    throw ConfigError("--heads", "", "\"" + f.heads + "\" is not HQ/HKV",
                      "give query and key/value heads, e.g. --heads 16/2");
  }
  c.head_dim = f.head_dim;
  c.backward = f.backward;
  c.repetitions = f.repetitions;
  c.warmup = f.warmup;
  c.seed = f.seed;
  c.check_rows = f.check_rows;
  return c;
}

nlohmann::json result_json(const AttentionBenchResult& r, const BenchAttentionFlags& f, const nlohmann::json& context) {
  // Zeros for no samples: fwdbwd_ms is empty without --backward (written as null below).
  const SampleStats fwd = sample_stats(r.fwd_ms).value_or(SampleStats{});
  const SampleStats fwdbwd = sample_stats(r.fwdbwd_ms).value_or(SampleStats{});
  const bool has_bwd = !r.fwdbwd_ms.empty();
  const AttentionBenchConfig& c = r.config;
  nlohmann::json j{{"impl", c.impl},
                   {"device", c.device},
                   {"dtype", dtype_name(c.dtype)},
                   {"seq_len", c.seq_len},
                   {"block", f.block},
                   {"top_k", f.top_k},
                   {"vs_verticals", f.vs_verticals},
                   {"vs_slashes", f.vs_slashes},
                   {"vs_block", f.vs_block},
                   {"vs_p", f.vs_p},
                   {"inputs", c.inputs},
                   {"q_heads", c.q_heads},
                   {"kv_heads", c.kv_heads},
                   {"head_dim", c.head_dim},
                   {"repetitions", c.repetitions},
                   {"warmup", c.warmup},
                   {"fwd_ms", fwd.median},
                   {"fwd_ms_min", fwd.min},
                   {"fwd_ms_max", fwd.max},
                   {"fwd_samples_ms", r.fwd_ms},
                   {"fwd_tflops", r.fwd_flop() / (fwd.median * 1e9)},
                   {"fwdbwd_ms", has_bwd ? nlohmann::json(fwdbwd.median) : nlohmann::json()},
                   {"fwdbwd_ms_min", has_bwd ? nlohmann::json(fwdbwd.min) : nlohmann::json()},
                   {"fwdbwd_ms_max", has_bwd ? nlohmann::json(fwdbwd.max) : nlohmann::json()},
                   {"fwdbwd_samples_ms", r.fwdbwd_ms},
                   {"fwdbwd_tflops", has_bwd ? nlohmann::json(r.fwdbwd_flop() / (fwdbwd.median * 1e9))
                                             : nlohmann::json()},
                   {"index_ms", r.index_ms.empty() ? nlohmann::json() : nlohmann::json(sample_stats(r.index_ms)->median)},
                   {"attended_pairs", r.attended_pairs},
                   {"coverage_mean", r.coverage_mean},
                   {"sdpa_kernel", r.sdpa_kernel.empty() ? nlohmann::json() : nlohmann::json(r.sdpa_kernel)},
                   {"max_abs_err", r.max_abs_err},
                   {"checked_rows", r.checked_rows},
                   {"peak_mem_bytes", r.peak_mem_bytes},
                   {"peak_mem_source", r.peak_mem_source},
                   {"context", context}};
  return j;
}

void print_table(const std::vector<nlohmann::json>& rows) {
  std::printf("%-11s %-5s %-9s %7s %5s %5s  %10s %10s %10s  %10s %10s %10s  %8s %8s  %10s %10s\n",
              "impl", "dev", "dtype", "seq", "block", "top_k", "fwd_ms", "min", "max", "fwdbwd_ms",
              "min", "max", "fwd_TF/s", "fb_TF/s", "max_err", "peak_MiB");
  for (const auto& j : rows) {
    auto num = [&](const char* key) {
      return j[key].is_null() ? std::string("-") : std::to_string(j[key].get<double>());
    };
    auto cut = [](std::string s) { return s.size() > 10 ? s.substr(0, 10) : s; };
    std::printf("%-11s %-5s %-9s %7lld %5lld %5lld  %10s %10s %10s  %10s %10s %10s  %8s %8s  %10.3e %10.1f\n",
                j["impl"].get<std::string>().c_str(), j["device"].get<std::string>().c_str(),
                j["dtype"].get<std::string>().c_str(), j["seq_len"].get<long long>(),
                j["block"].get<long long>(), j["top_k"].get<long long>(), cut(num("fwd_ms")).c_str(),
                cut(num("fwd_ms_min")).c_str(), cut(num("fwd_ms_max")).c_str(),
                cut(num("fwdbwd_ms")).c_str(), cut(num("fwdbwd_ms_min")).c_str(),
                cut(num("fwdbwd_ms_max")).c_str(), cut(num("fwd_tflops")).c_str(),
                cut(num("fwdbwd_tflops")).c_str(), j["max_abs_err"].get<double>(),
                static_cast<double>(j["peak_mem_bytes"].get<int64_t>()) / (1 << 20));
  }
  // Each later row against the first (e.g. --impl dense,moba-fused,moba-varlen).
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto ratio = [&](const char* key) {
      if (rows[0][key].is_null() || rows[i][key].is_null()) return std::string("-");
      return std::to_string(rows[0][key].get<double>() / rows[i][key].get<double>());
    };
    std::printf("%s / %s time ratio (median): fwd %s, fwd+bwd %s; attended pairs %s / %s: %.4f\n",
                rows[0]["impl"].get<std::string>().c_str(), rows[i]["impl"].get<std::string>().c_str(),
                ratio("fwd_ms").c_str(), ratio("fwdbwd_ms").c_str(), rows[i]["impl"].get<std::string>().c_str(),
                rows[0]["impl"].get<std::string>().c_str(),
                rows[i]["attended_pairs"].get<double>() / rows[0]["attended_pairs"].get<double>());
  }
}

}  // namespace

Command register_bench(CLI::App& app) {
  auto f = std::make_shared<BenchAttentionFlags>();
  CLI::App* bench = app.add_subcommand("bench", "Microbenchmarks of the kernels (see docs/benchmarks.md)");
  bench->require_subcommand(1);
  CLI::App* sub = bench->add_subcommand(
      "attention", "Time attention patterns (forward, forward+backward) on one sequence");
  sub->footer(
      "Median, min and max over --repetitions after --warmup runs; TF/s = attended-pair FLOPs / "
      "median time (docs/benchmarks.md, 'bench attention'); max_err = max |output - float64 reference| on the "
      "last query rows; peak = memory one run holds beyond its inputs (measured on a first, "
      "untimed run). --impl dense,moba runs both in one process, repetitions in turns, and prints "
      "their time ratio. --json prints one JSON object per impl and line.");
  sub->add_option("--impl", f->impl,
                  "A pattern (" + known_impls() + "; dense runs SDPA's choice of kernel, dense-flash pins it to "
                  "flash-attention, moba-fused and moba-varlen force a MoBA CUDA path, ring-* is the "
                  "context-parallel ring on one rank), or a comma list (dense,moba)")
      ->capture_default_str();
  sub->add_option("--seq-len", f->seq_len, "Tokens of the sequence")->capture_default_str();
  sub->add_option("--block", f->block, "MoBA block size")->capture_default_str();
  sub->add_option("--top-k", f->top_k, "MoBA budget k (diagonal included)")->capture_default_str();
  sub->add_option("--vs-verticals", f->vs_verticals, "vertical_slash: key columns kept besides the 30 sinks")
      ->capture_default_str();
  sub->add_option("--vs-slashes", f->vs_slashes, "vertical_slash: offsets kept besides the 100-offset local window")
      ->capture_default_str();
  sub->add_option("--vs-block", f->vs_block, "vertical_slash: tokens per query and key block slashes expand to")
      ->capture_default_str();
  sub->add_option("--vs-p", f->vs_p, "vertical_slash: keep each list's top-p mass instead of the counts (0: counts)")
      ->capture_default_str();
  sub->add_option("--inputs", f->inputs,
                  "random (q, k, v ~ N(0, 1)) or local (q and k rotated by RoPE around a shared direction: "
                  "attention peaks near each query, as a trained model's)")
      ->capture_default_str();
  sub->add_option("--heads", f->heads, "Query/key-value heads, HQ/HKV")->capture_default_str();
  sub->add_option("--head-dim", f->head_dim, "Head dimension")->capture_default_str();
  sub->add_flag("--backward", f->backward, "Also time forward+backward");
  sub->add_option("--device", f->device, "cpu or cuda")->capture_default_str();
  sub->add_option("--dtype", f->dtype, "float32, float64, bfloat16, float16 (default: float32 on "
                                       "cpu, bfloat16 on cuda)");
  sub->add_flag("--json", f->json, "Print one JSON object per impl (one per line)");
  sub->add_option("--repetitions", f->repetitions, "Timed runs")->capture_default_str();
  sub->add_option("--warmup", f->warmup, "Untimed runs first")->capture_default_str();
  sub->add_option("--threads", f->threads, "Intra-op CPU threads (0: LibTorch's default)")
      ->capture_default_str();
  sub->add_option("--check-rows", f->check_rows,
                  "Query rows checked against the float64 reference (0: as many as fit in ~1 GiB)")
      ->capture_default_str();
  sub->add_option("--seed", f->seed, "Seed of the random inputs")->capture_default_str();
  return [f]() {
    if (f->threads < 0) throw ConfigError("--threads", "", "must be >= 0", "pass 0 for the default");
    if (f->threads > 0) at::set_num_threads(static_cast<int>(f->threads));
    std::vector<AttentionBenchConfig> configs;
    for (const std::string& impl : split(f->impl, ',')) configs.push_back(config_from(*f, impl));

    const nlohmann::json info = collect_system_info();
    nlohmann::json context{{"threads", at::get_num_threads()}};
    for (const char* key : {"host", "cpu_model", "cpu_cores", "libtorch", "cuda_runtime", "driver",
                            "gpu_count", "git_sha", "git_dirty", "build_type"}) {
      if (info.contains(key)) context[key] = info.at(key);
    }
    std::vector<AttentionBenchResult> results;
    try {
      results = run_attention_benchmarks(configs);
    } catch (const std::invalid_argument& e) {
      throw ConfigError("bench attention", "", e.what(), "see sparsebalance bench attention --help");
    }
    std::vector<nlohmann::json> rows;
    for (const AttentionBenchResult& result : results) {
      rows.push_back(result_json(result, *f, context));
      if (f->json) std::cout << rows.back().dump() << std::endl;
    }
    if (!f->json) {
      std::printf("LibTorch %s, %d threads, build %s, git %s\n",
                  info["libtorch"].get<std::string>().c_str(), at::get_num_threads(),
                  info["build_type"].get<std::string>().c_str(),
                  info["git_sha"].get<std::string>().c_str());
      print_table(rows);
    }
    if (std::string warning = debug_build_warning(); !warning.empty()) std::cerr << warning << "\n";
    return 0;
  };
}

}  // namespace sb::cli
