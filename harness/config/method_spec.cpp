#include "harness/config/method_spec.h"

#include <filesystem>
#include <map>

#include "common/errors.h"
#include "harness/balance/batching_policy.h"
#include "harness/balance/budget_policy.h"
#include "harness/common/json_object_reader.h"
#include "harness/patterns/attention_patterns.h"

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
    // A pattern's parameters apply to methods of that pattern only (one pattern's block
    // size is not another's).
    const std::string own_name = string_or(attention, "name", default_attention_options().name());
    const std::string defaults_name = string_or(d["attention"], "name", own_name);
    if (defaults_name == own_name) {
      try {
        for (const std::string& key : attention_plugin(own_name).keys()) {
          if (d["attention"].contains(key) && !attention.contains(key)) attention[key] = d["attention"][key];
        }
      } catch (const std::invalid_argument&) {
        // An unknown name: parse_attention names the known ones.
      }
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

// Budgets in kept keys per query have no cap of their own by default: a sequence's dense
// mean bounds them (saturating_budget in budget_policy.h).
constexpr int64_t kKeptKeysDefaultKMax = int64_t{1} << 20;

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
  // Without a budget axis the method is refused after its keys are read (parse_method_section).
  if (attention.budget_axis() == BudgetAxis::kNone) return d;
  if (attention.budget_axis() == BudgetAxis::kKeptKeys) {
    // k0 differs per micro-batch there (the pattern's own kept keys): only the range's order is checked.
    if (d.k_max == 0) d.k_max = kKeptKeysDefaultKMax;
    r.expect(d.k_min >= 1, "k_min", "must be >= 1 (kept keys per query)", "e.g. 1");
    r.expect(d.k_max >= d.k_min, "k_max", "must be >= k_min", "raise it, or leave it out (no cap)");
    return d;
  }
  const int64_t top_k = attention.pattern().default_budget();
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
  const json* attention = r.optional_value("attention");
  m.attention = attention != nullptr ? parse_attention(*attention, r.child_path("attention"), file)
                                     : default_attention_options();
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
  std::string budgeted;
  for (const AttentionPatternPlugin* plugin : attention_plugins()) {
    if (plugin->make_default().budget_axis() == BudgetAxis::kNone) continue;
    budgeted += (budgeted.empty() ? "" : " or ") + ("\"" + plugin->name() + "\"");
  }
  r.expect(m.budget != BudgetKind::kDst || m.attention.budget_axis() != BudgetAxis::kNone, "budget",
           "dst tunes a sparse attention budget, and attention is \"" + m.attention.name() + "\"",
           "use attention " + budgeted + ", or budget \"fixed\"");
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
      a.optional_choice("name", "moba", attention_pattern_names());
      for (const AttentionPatternPlugin* plugin : attention_plugins()) plugin->check_default_keys(a);
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
  const json attention = attention_to_json(m.attention);
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
