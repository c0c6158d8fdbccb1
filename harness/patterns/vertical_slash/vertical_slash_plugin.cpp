#include "harness/patterns/vertical_slash/vertical_slash_plugin.h"

#include <algorithm>

#include "common/errors.h"
#include "harness/patterns/vertical_slash/vertical_slash_pattern_fit.h"
#include "harness/patterns/vertical_slash/vertical_slash_simulation.h"

namespace sb {
namespace {

const VerticalSlashOptions& options_of(const AttentionPattern& pattern) {
  const auto* vs = dynamic_cast<const VerticalSlashPattern*>(&pattern);
  if (vs == nullptr) throw std::logic_error("vertical_slash plug-in: a " + pattern.name() + " pattern");
  return vs->options();
}

// The keys of a vertical_slash attention object besides "name".
constexpr const char* kKeys[] = {"budget",       "p",           "vertical_count", "slash_count",
                                 "max_verticals", "max_slashes", "sink_tokens",    "local_window",
                                 "last_queries",  "expected_keys", "block_size"};

VerticalSlashOptions read_options(JsonObjectReader& r) {
  VerticalSlashOptions o;
  VerticalSlashParams& v = o.params;
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
  o.expected_keys = r.optional<int64_t>("expected_keys", o.expected_keys);
  r.expect(o.expected_keys >= 1, "expected_keys", "must be >= 1",
           "e.g. 1024 (kept keys per query assumed before the layers report the pattern's own)");
  return o;
}

class VerticalSlashPlugin : public AttentionPatternPlugin {
 public:
  std::string name() const override { return "vertical_slash"; }
  std::vector<std::string> keys() const override { return {std::begin(kKeys), std::end(kKeys)}; }

  AttentionOptions parse(JsonObjectReader& r) const override { return vertical_slash_attention_options(read_options(r)); }

  nlohmann::json to_json(const AttentionPattern& pattern) const override {
    const VerticalSlashOptions& o = options_of(pattern);
    const VerticalSlashParams& v = o.params;
    nlohmann::json j{{"name", name()},
                     {"budget", vertical_slash_budget_options().name_of(v.budget)},
                     {"p", v.p},
                     {"vertical_count", v.vertical_count},
                     {"slash_count", v.slash_count},
                     {"max_verticals", v.max_verticals},
                     {"max_slashes", v.max_slashes},
                     {"sink_tokens", v.sink_tokens},
                     {"local_window", v.local_window},
                     {"last_queries", v.last_queries},
                     {"block_size", v.block_size}};
    // Only when set, so that results resolved before the key existed still match on a rerun.
    if (o.expected_keys != VerticalSlashOptions{}.expected_keys) j["expected_keys"] = o.expected_keys;
    return j;
  }

  void check_default_keys(JsonObjectReader& r) const override {
    r.optional_choice("budget", "top_p", vertical_slash_budget_options().names());
    r.optional<double>("p", 0);
    for (const char* key : kKeys) {
      if (std::string(key) != "budget" && std::string(key) != "p") r.optional<int64_t>(key, 0);
    }
  }

  std::vector<AttentionFlag> profile_flags() const override {
    return {{"--block", "block_size", "Tokens per attention block (default: the pattern's)", true},
            {"--last-queries", "last_queries", "vertical_slash: the last queries the index reads"},
            {"--sink-tokens", "sink_tokens", "vertical_slash: the first columns always kept"},
            {"--local-window", "local_window", "vertical_slash: the offsets 0 .. n - 1 always kept"},
            {"--max-verticals", "max_verticals", "vertical_slash: the most columns kept"},
            {"--max-slashes", "max_slashes", "vertical_slash: the most offsets kept"}};
  }

  // MTraining's pattern with fixed counts (top-k) or top-p, the public code's sinks and
  // window; the caps let the counts through.
  std::vector<AttentionBenchKey> bench_keys(const nlohmann::json& flags) const override {
    const VerticalSlashParams defaults;
    const double p = flags.at("vs_p").get<double>();
    if (p < 0) throw ConfigError("--vs-p", "", "must be in [0, 1] (0: top-k counts)", "e.g. 0.9");
    const int64_t verticals = flags.at("vs_verticals").get<int64_t>(), slashes = flags.at("vs_slashes").get<int64_t>();
    std::vector<AttentionBenchKey> keys{
        {"budget", "--vs-p", p > 0 ? "top_p" : "top_k"},
        {"block_size", "--vs-block", flags.at("vs_block")},
        {"vertical_count", "--vs-verticals", verticals},
        {"slash_count", "--vs-slashes", slashes},
        {"max_verticals", "--vs-verticals", std::max<int64_t>(defaults.max_verticals, defaults.sink_tokens + verticals)},
        {"max_slashes", "--vs-slashes", std::max<int64_t>(defaults.max_slashes, defaults.local_window + slashes)}};
    if (p > 0) keys.push_back({"p", "--vs-p", p});
    return keys;
  }

  AttentionOptions from_profile_fields(const std::map<std::string, int64_t>& fields) const override {
    VerticalSlashOptions o;
    VerticalSlashParams& v = o.params;
    const auto field = [&fields](const char* key, int64_t& value) {
      if (const auto it = fields.find(key); it != fields.end()) value = it->second;
    };
    field("block_size", v.block_size);
    field("last_queries", v.last_queries);
    field("sink_tokens", v.sink_tokens);
    field("local_window", v.local_window);
    field("max_verticals", v.max_verticals);
    field("max_slashes", v.max_slashes);
    return vertical_slash_attention_options(o);
  }

  // Lengths in steps of 256 tokens; kept keys per query doubling from 1 up to the longest
  // sequence's dense mean (the predictor interpolates linearly between them; the term is
  // linear in the budget up to each length's own dense mean, where it bends between two
  // grid points).
  AnalyticGrid analytic_grid(const AttentionPattern& /*pattern*/, int64_t longest_sample,
                             int64_t /*dst_k_max*/) const override {
    AnalyticGrid grid{analytic_profile_lengths(256, longest_sample), {}};
    const int64_t saturated = (grid.seq_lens.back() + 2) / 2;
    for (int64_t k = 1; k < saturated; k *= 2) grid.budgets.push_back(k);
    grid.budgets.push_back(saturated);
    return grid;
  }

  std::unique_ptr<AttentionSimulation> simulation(const AttentionPattern& pattern, const SimulationCoverage& coverage,
                                                  const std::string& manifest_file) const override {
    try {
      return std::make_unique<VerticalSlashSimulation>(options_of(pattern).params, coverage);
    } catch (const std::invalid_argument& e) {
      throw ConfigError(manifest_file, "$.simulation.coverage",
                        std::string("with the method's vertical_slash attention gives no pattern model: ") + e.what(),
                        "give rule_keys >= 1 for a top_k rule whose counts are all 0, or check the attention block");
    }
  }

  FittedCoverage fit_coverage(const AttentionPattern& pattern, const SimulationCoverage& coverage,
                              const std::filesystem::path& results_dir, const std::string& manifest_file,
                              const std::string& json_path, std::ostream& log) const override {
    const VerticalSlashParams& params = options_of(pattern).params;
    const VerticalSlashPatternRule rule = vertical_slash_pattern_rule(params, 0, coverage.spread);
    const VerticalSlashPatternFit fit =
        fit_vertical_slash_pattern_from_results(results_dir, params, rule, manifest_file, json_path);
    log << "vertical-slash coverage exponent fitted to " << fit.coverage_points << " (micro-batch, layer) coverages of "
        << fit.runs.size() << " measured runs under " << results_dir.string() << ": s = " << fit.exponent << " (RMSE "
        << fit.coverage_rmse << ")";
    if (!rule.top_p) {
      log << "; the rule's keys per late query to " << fit.rule_points << " sequences: " << fit.rule_keys << " (RMSE "
          << fit.rule_rmse << " kept keys per query)";
    }
    if (fit.spread_fitted) {
      log << "; the spread to the per-rank work of " << fit.spread_points << " context-parallel micro-batches: "
          << fit.spread << " (RMSE " << fit.spread_rmse << " of a rank's share)";
    }
    log << "\n";
    FittedCoverage out{coverage,
                       fit.runs,
                       {{"coverage_points", fit.coverage_points},
                        {"coverage_rmse", fit.coverage_rmse},
                        {"rule_points", fit.rule_points},
                        {"rule_rmse", fit.rule_rmse},
                        {"spread_fitted", fit.spread_fitted},
                        {"spread_points", fit.spread_points},
                        {"spread_rmse", fit.spread_rmse}}};
    out.coverage.exponent = fit.exponent;
    if (!rule.top_p) out.coverage.rule_keys = fit.rule_keys;
    out.coverage.spread = fit.spread;
    return out;
  }
};

}  // namespace

const AttentionPatternPlugin& vertical_slash_plugin() {
  static const VerticalSlashPlugin plugin;
  return plugin;
}

VerticalSlashOptions vertical_slash_options_from_json(const nlohmann::json& attention, const std::string& path,
                                                      const std::string& file) {
  JsonObjectReader r(attention, path, file);
  const std::string name = r.required<std::string>("name");
  if (name != "vertical_slash") {
    throw ConfigError(file, r.child_path("name"), "is \"" + name + "\", not \"vertical_slash\"");
  }
  VerticalSlashOptions options = read_options(r);
  r.finish();
  return options;
}

}  // namespace sb
