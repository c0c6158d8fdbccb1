#include "harness/config/method_spec.h"

#include <filesystem>
#include <map>

#include "common/errors.h"
#include "harness/balance/batching_policy.h"
#include "harness/balance/budget_policy.h"
#include "harness/common/json_object_reader.h"

namespace sb {
namespace {

using nlohmann::json;

// Preset name -> the keys it sets. The rows of the paper's Table I.
const std::map<std::string, json>& method_presets() {
  static const std::map<std::string, json> presets{
      {"dense", {{"attention", {{"name", "dense"}}}, {"batching", "sequential"}, {"budget", "fixed"}}},
      {"baseline", {{"attention", {{"name", "moba"}}}, {"batching", "sequential"}, {"budget", "fixed"}}},
      {"dst", {{"attention", {{"name", "moba"}}}, {"batching", "sequential"}, {"budget", "dst"}}},
      {"sab", {{"attention", {{"name", "moba"}}}, {"batching", "sab"}, {"budget", "fixed"}}},
      {"sab+dst", {{"attention", {{"name", "moba"}}}, {"batching", "sab"}, {"budget", "dst"}}},
      {"lbb", {{"attention", {{"name", "moba"}}}, {"batching", "lbb"}, {"budget", "fixed"}}},
      {"lbb+dst", {{"attention", {{"name", "moba"}}}, {"batching", "lbb"}, {"budget", "dst"}}},
  };
  return presets;
}

json attention_object(const json& value) {
  return value.is_string() ? json{{"name", value}} : value;
}

// a's keys overridden by b's; objects merged key by key.
json merge_over(json a, const json& b) {
  for (const auto& [key, value] : b.items()) {
    if (a.contains(key) && a[key].is_object() && value.is_object()) {
      a[key] = merge_over(a[key], value);
    } else {
      a[key] = value;
    }
  }
  return a;
}

std::string string_or(const json& j, const std::string& key, const std::string& fallback) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : fallback;
}

// The keys of a vertical_slash attention object besides "name" (docs/vertical_slash.md).
constexpr const char* kVerticalSlashKeys[] = {"budget",        "p",           "vertical_count",
                                              "slash_count",   "max_verticals", "max_slashes",
                                              "sink_tokens",   "local_window",  "last_queries",
                                              "expected_keys"};

// The method's own keys over its preset, then the applicable parts of the defaults.
json effective_method_json(const json& own, const json* defaults, const std::string& path,
                           const std::string& file) {
  json merged = json::object();
  if (own.is_object() && own.contains("preset")) {
    const json& preset = own["preset"];
    const auto it = preset.is_string() ? method_presets().find(preset.get<std::string>()) : method_presets().end();
    if (it == method_presets().end()) {
      std::string known;
      for (const auto& [name, _] : method_presets()) known += (known.empty() ? "" : ", ") + name;
      throw ConfigError(file, path + ".preset", "unknown method preset " + preset.dump(), "use one of: " + known);
    }
    merged = it->second;
  }
  json mine = own;
  if (mine.is_object() && mine.contains("attention")) mine["attention"] = attention_object(mine["attention"]);
  merged = merge_over(merged, mine);
  if (defaults == nullptr) return merged;

  json d = *defaults;
  if (d.contains("attention")) d["attention"] = attention_object(d["attention"]);
  // Names first (batching, budget, attention name), then the parameters that apply.
  for (const char* key : {"batching", "budget", "profile"}) {
    if (d.contains(key) && !merged.contains(key)) merged[key] = d[key];
  }
  if (d.contains("attention") && d["attention"].is_object()) {
    json attention = merged.contains("attention") ? merged["attention"] : json::object();
    if (!attention.contains("name") && d["attention"].contains("name")) attention["name"] = d["attention"]["name"];
    // A pattern's parameters apply to methods of that pattern only (a vertical-slash
    // block size is not a MoBA block size).
    const std::string defaults_name = string_or(d["attention"], "name", string_or(attention, "name", "dense"));
    const auto inherit = [&](const char* key) {
      if (defaults_name != string_or(attention, "name", "dense")) return;
      if (d["attention"].contains(key) && !attention.contains(key)) attention[key] = d["attention"][key];
    };
    if (string_or(attention, "name", "dense") == "moba") {
      for (const char* key : {"block_size", "top_k", "cuda_kernel"}) inherit(key);
    }
    if (string_or(attention, "name", "dense") == "vertical_slash") {
      inherit("block_size");
      for (const char* key : kVerticalSlashKeys) inherit(key);
    }
    merged["attention"] = attention;
  }
  if (d.contains("dst") && string_or(merged, "budget", "fixed") == "dst") {
    merged["dst"] = merge_over(d["dst"], merged.contains("dst") ? merged["dst"] : json::object());
  }
  if (d.contains("sab") && string_or(merged, "batching", "sequential") == "sab") {
    merged["sab"] = merge_over(d["sab"], merged.contains("sab") ? merged["sab"] : json::object());
  }
  // Calibration applies to every method that predicts with a profile.
  if (d.contains("latency_calibration") && merged.contains("profile")) {
    merged["latency_calibration"] = merge_over(
        d["latency_calibration"], merged.contains("latency_calibration") ? merged["latency_calibration"] : json::object());
  }
  return merged;
}

void parse_vertical_slash(JsonObjectReader& r, VerticalSlashParams& v) {
  v.budget = r.optional_option("budget", v.budget, vertical_slash_budget_options());
  v.p = r.optional<double>("p", v.p);
  v.vertical_count = r.optional<int64_t>("vertical_count", v.vertical_count);
  v.slash_count = r.optional<int64_t>("slash_count", v.slash_count);
  v.max_verticals = r.optional<int64_t>("max_verticals", v.max_verticals);
  v.max_slashes = r.optional<int64_t>("max_slashes", v.max_slashes);
  v.sink_tokens = r.optional<int64_t>("sink_tokens", v.sink_tokens);
  v.local_window = r.optional<int64_t>("local_window", v.local_window);
  v.last_queries = r.optional<int64_t>("last_queries", v.last_queries);
  v.block_size = r.optional<int64_t>("block_size", v.block_size);
  if (const auto problem = v.first_problem()) r.expect(false, problem->field, problem->message, problem->fix);
}

AttentionOptions parse_attention(const json& j, const std::string& path, const std::string& file) {
  JsonObjectReader r(j, path, file);
  AttentionOptions a;
  a.kind = r.required_option("name", attention_kind_options());
  const bool moba = a.is_moba();
  const bool vs = a.is_vertical_slash();
  r.reject_unless("block_size", moba || vs, "name is \"moba\" or \"vertical_slash\"");
  r.reject_unless("top_k", moba, "name is \"moba\"");
  r.reject_unless("cuda_kernel", moba, "name is \"moba\"");
  if (moba) {
    a.block_size = r.optional<int64_t>("block_size", a.block_size);
    a.top_k = r.optional<int64_t>("top_k", a.top_k);
    a.moba_cuda_kernel = r.optional_option("cuda_kernel", a.moba_cuda_kernel, moba_cuda_kernel_options());
  }
  for (const char* key : kVerticalSlashKeys) r.reject_unless(key, vs, "name is \"vertical_slash\"");
  if (vs) {
    parse_vertical_slash(r, a.vertical_slash);
    a.expected_keys = r.optional<int64_t>("expected_keys", a.expected_keys);
    r.expect(a.expected_keys >= 1, "expected_keys", "must be >= 1",
             "e.g. 1024 (kept keys per query assumed before the layers report the pattern's own)");
  }
  r.finish();
  r.expect(a.block_size >= 1, "block_size", "must be >= 1", "e.g. 256 (the paper) or 64 at CPU scale");
  r.expect(a.top_k >= 1, "top_k", "must be >= 1", "e.g. 32 (the paper) or 8 at CPU scale");
  return a;
}

// Vertical-slash budgets (kept keys per query) have no cap of their own by default: a
// sequence's dense mean bounds them (saturating_budget in budget_policy.h).
constexpr int64_t kVerticalSlashDefaultKMax = int64_t{1} << 20;

DstOptions parse_dst(const json& j, const std::string& path, const std::string& file, const AttentionOptions& attention) {
  JsonObjectReader r(j, path, file);
  DstOptions d;
  d.anchor = r.optional_option("anchor", d.anchor, dst_anchor_options());
  d.p = r.optional<double>("p", d.p);
  d.k_min = r.optional<int64_t>("k_min", d.k_min);
  d.k_max = r.optional<int64_t>("k_max", 0);
  d.bottleneck = r.optional_option("bottleneck", d.bottleneck, dst_bottleneck_options());
  d.raise = r.optional_option("raise", d.raise, dst_raise_options());
  r.finish();
  r.expect(d.p >= 0 && d.p <= 1, "p", "must be in [0, 1]", "the paper uses 0.1 or 0.2");
  if (attention.is_vertical_slash()) {
    // k0 differs per micro-batch there (the pattern's own kept keys): only the range's order is checked.
    if (d.k_max == 0) d.k_max = kVerticalSlashDefaultKMax;
    r.expect(d.k_min >= 1, "k_min", "must be >= 1 (kept keys per query)", "e.g. 1");
    r.expect(d.k_max >= d.k_min, "k_max", "must be >= k_min", "raise it, or leave it out (no cap)");
    return d;
  }
  const int64_t top_k = attention.top_k;
  if (d.k_max == 0) d.k_max = 2 * top_k;
  r.expect(d.k_min >= 1 && d.k_min <= top_k, "k_min", "must be in [1, attention.top_k]",
           "lower it to at most the default budget " + std::to_string(top_k));
  r.expect(d.k_max >= top_k, "k_max", "must be >= attention.top_k", "raise it to at least " + std::to_string(top_k));
  return d;
}

}  // namespace

std::vector<std::string> method_preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, _] : method_presets()) names.push_back(name);
  return names;
}

MethodSection parse_method_section(const json& own, const json* defaults, const std::string& path,
                                   const std::string& file) {
  const json j = effective_method_json(own, defaults, path, file);
  JsonObjectReader r(j, path, file);
  MethodSection m;
  m.name = r.required<std::string>("name");
  m.preset = r.optional<std::string>("preset", "");
  if (const json* attention = r.optional_value("attention")) {
    m.attention = parse_attention(*attention, r.child_path("attention"), file);
  }
  m.batching = r.optional_option("batching", m.batching, batching_kind_options());
  m.budget = r.optional_option("budget", m.budget, budget_kind_options());
  r.reject_unless("dst", m.budget == BudgetKind::kDst, "budget is \"dst\"");
  r.reject_unless("sab", m.batching == BatchingKind::kSab, "batching is \"sab\"");
  if (m.budget == BudgetKind::kDst) {
    const json* dst = r.optional_value("dst");
    m.dst = parse_dst(dst != nullptr ? *dst : json::object(), r.child_path("dst"), file, m.attention);
  }
  if (m.batching == BatchingKind::kSab) {
    if (const json* sab = r.optional_value("sab")) {
      JsonObjectReader s(*sab, r.child_path("sab"), file);
      m.sab.ema_alpha = s.optional<double>("ema_alpha", m.sab.ema_alpha);
      s.finish();
      s.expect(m.sab.ema_alpha > 0 && m.sab.ema_alpha <= 1, "ema_alpha", "must be in (0, 1]", "e.g. 0.2");
    }
  }
  m.profile = resolve_manifest_path(file, r.optional<std::string>("profile", ""));
  if (const json* calibration = r.optional_value("latency_calibration")) {
    JsonObjectReader c(*calibration, r.child_path("latency_calibration"), file);
    m.latency_calibration.enabled = true;
    m.latency_calibration.ema_alpha = c.optional<double>("ema_alpha", m.latency_calibration.ema_alpha);
    c.finish();
    c.expect(m.latency_calibration.ema_alpha > 0 && m.latency_calibration.ema_alpha <= 1, "ema_alpha",
             "must be in (0, 1]", "e.g. 0.3");
    r.expect(!m.profile.empty(), "latency_calibration", "calibrates latency predictions, and the method has no profile",
             "name a profile, or leave latency_calibration out");
  }
  r.finish();
  r.expect(m.budget != BudgetKind::kDst || m.attention.is_moba() || m.attention.is_vertical_slash(), "budget",
           "dst tunes a sparse attention budget, and attention is \"" + m.attention.name() + "\"",
           "use attention \"moba\" or \"vertical_slash\", or budget \"fixed\"");
  return m;
}

bool method_needs_profile(const MethodSection& m) {
  return m.batching == BatchingKind::kSab || m.budget == BudgetKind::kDst;
}

void check_method_profile(const MethodSection& m, const std::string& path, const std::string& manifest_file,
                          bool simulation_profile) {
  if (!method_needs_profile(m) || !m.profile.empty() || simulation_profile) return;
  throw ConfigError(manifest_file, path + ".profile",
                    "is required: batching \"" + batching_kind_options().name_of(m.batching) + "\" with budget \"" +
                        budget_kind_options().name_of(m.budget) + "\" predicts latency",
                    "name a latency profile file (made by `sparsebalance profile`, or measured on first use when "
                    "missing); `sparsebalance simulate` also accepts simulation.profile");
}

void check_method_defaults(const json& defaults, const std::string& path, const std::string& file) {
  JsonObjectReader r(defaults, path, file);
  for (const char* forbidden : {"name", "preset"}) {
    if (r.contains(forbidden)) {
      throw ConfigError(file, r.child_path(forbidden), "cannot be a default", "set it in each method");
    }
  }
  if (const json* attention = r.optional_value("attention")) {
    if (!attention->is_string()) {
      JsonObjectReader a(*attention, r.child_path("attention"), file);
      a.optional_choice("name", "moba", attention_kind_options().names());
      a.optional<int64_t>("block_size", 0);
      a.optional<int64_t>("top_k", 0);
      a.optional_choice("cuda_kernel", "auto", moba_cuda_kernel_options().names());
      a.optional_choice("budget", "top_p", vertical_slash_budget_options().names());
      a.optional<double>("p", 0);
      for (const char* key : kVerticalSlashKeys) {
        if (std::string(key) != "budget" && std::string(key) != "p") a.optional<int64_t>(key, 0);
      }
      a.finish();
    }
  }
  r.optional_choice("batching", "sequential", batching_kind_options().names());
  r.optional_choice("budget", "fixed", budget_kind_options().names());
  if (const json* dst = r.optional_value("dst")) {
    JsonObjectReader d(*dst, r.child_path("dst"), file);
    d.optional_choice("anchor", "mean", dst_anchor_options().names());
    d.optional<double>("p", 0);
    d.optional<int64_t>("k_min", 0);
    d.optional<int64_t>("k_max", 0);
    d.optional_choice("bottleneck", "smallest", dst_bottleneck_options().names());
    d.optional_choice("raise", "anchor", dst_raise_options().names());
    d.finish();
  }
  if (const json* sab = r.optional_value("sab")) {
    JsonObjectReader a(*sab, r.child_path("sab"), file);
    a.optional<double>("ema_alpha", 0);
    a.finish();
  }
  if (const json* calibration = r.optional_value("latency_calibration")) {
    JsonObjectReader a(*calibration, r.child_path("latency_calibration"), file);
    a.optional<double>("ema_alpha", 0);
    a.finish();
  }
  r.optional<std::string>("profile", "");
  r.finish();
}

json method_to_json(const MethodSection& m) {
  json attention{{"name", m.attention.name()}};
  if (m.attention.is_moba()) {
    attention["block_size"] = m.attention.block_size;
    attention["top_k"] = m.attention.top_k;
    // Only when not the default, so that results resolved before the key existed still match.
    if (m.attention.moba_cuda_kernel != MobaCudaKernel::kAuto) {
      attention["cuda_kernel"] = moba_cuda_kernel_options().name_of(m.attention.moba_cuda_kernel);
    }
  }
  if (m.attention.is_vertical_slash()) {
    const VerticalSlashParams& v = m.attention.vertical_slash;
    attention["budget"] = vertical_slash_budget_options().name_of(v.budget);
    attention["p"] = v.p;
    attention["vertical_count"] = v.vertical_count;
    attention["slash_count"] = v.slash_count;
    attention["max_verticals"] = v.max_verticals;
    attention["max_slashes"] = v.max_slashes;
    attention["sink_tokens"] = v.sink_tokens;
    attention["local_window"] = v.local_window;
    attention["last_queries"] = v.last_queries;
    attention["block_size"] = v.block_size;
    // Only when set, so that results resolved before the key existed still match on a rerun.
    if (m.attention.expected_keys != AttentionOptions{}.expected_keys) attention["expected_keys"] = m.attention.expected_keys;
  }
  json j{{"name", m.name},
          {"attention", attention},
          {"batching", batching_kind_options().name_of(m.batching)},
          {"budget", budget_kind_options().name_of(m.budget)}};
  if (!m.preset.empty()) j["preset"] = m.preset;
  if (m.budget == BudgetKind::kDst) {
    j["dst"] = {{"anchor", dst_anchor_options().name_of(m.dst.anchor)}, {"p", m.dst.p}, {"k_min", m.dst.k_min},
                {"k_max", m.dst.k_max}, {"bottleneck", dst_bottleneck_options().name_of(m.dst.bottleneck)}};
    // Written only when not the default, so that results resolved before the key existed
    // still match their manifest on a rerun (resume, skip).
    if (m.dst.raise != DstRaiseRule::kAnchor) j["dst"]["raise"] = dst_raise_options().name_of(m.dst.raise);
  }
  if (m.batching == BatchingKind::kSab) j["sab"] = {{"ema_alpha", m.sab.ema_alpha}};
  if (!m.profile.empty()) j["profile"] = m.profile;
  if (m.latency_calibration.enabled) j["latency_calibration"] = {{"ema_alpha", m.latency_calibration.ema_alpha}};
  return j;
}

}  // namespace sb
