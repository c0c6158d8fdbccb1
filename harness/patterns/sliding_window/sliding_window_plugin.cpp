#include "harness/patterns/sliding_window/sliding_window_plugin.h"

#include <algorithm>

#include "common/errors.h"
#include "harness/patterns/sliding_window/sliding_window_simulation.h"
#include "kernels/attention/patterns/sliding_window/sliding_window_pattern.h"

namespace sb {
namespace {

const SlidingWindowOptions& options_of(const AttentionPattern& pattern) {
  const auto* sw = dynamic_cast<const SlidingWindowPattern*>(&pattern);
  if (sw == nullptr) throw std::logic_error("sliding_window plug-in: a " + pattern.name() + " pattern");
  return sw->options();
}

class SlidingWindowPlugin : public AttentionPatternPlugin {
 public:
  std::string name() const override { return "sliding_window"; }
  std::vector<std::string> keys() const override { return {"window", "sink_tokens", "block_size"}; }

  AttentionOptions parse(JsonObjectReader& r) const override {
    SlidingWindowOptions o;
    o.window = r.optional<int64_t>("window", o.window);
    o.sink_tokens = r.optional<int64_t>("sink_tokens", o.sink_tokens);
    o.block_size = r.optional<int64_t>("block_size", o.block_size);
    if (const auto problem = sliding_window_first_problem(o)) r.expect(false, problem->field, problem->problem, problem->fix);
    return sliding_window_attention_options(o);
  }

  nlohmann::json to_json(const AttentionPattern& pattern) const override {
    const SlidingWindowOptions& o = options_of(pattern);
    return {{"name", name()}, {"window", o.window}, {"sink_tokens", o.sink_tokens}, {"block_size", o.block_size}};
  }

  void check_default_keys(JsonObjectReader& r) const override {
    for (const char* key : {"window", "sink_tokens", "block_size"}) r.optional<int64_t>(key, 0);
  }

  std::vector<AttentionFlag> profile_flags() const override {
    return {{"--block", "block_size", "Tokens per attention block (default: the pattern's)", true},
            {"--sink-tokens", "sink_tokens", "the first tokens of a sequence every query keeps"}};
  }

  std::vector<AttentionBenchKey> bench_keys(const nlohmann::json& flags) const override {
    return {{"window", "--top-k", flags.at("top_k").get<int64_t>() * flags.at("block").get<int64_t>()}};
  }

  AttentionOptions from_profile_fields(const std::map<std::string, int64_t>& fields) const override {
    SlidingWindowOptions o;
    if (const auto it = fields.find("block_size"); it != fields.end() && it->second > 0) o.block_size = it->second;
    if (const auto it = fields.find("sink_tokens"); it != fields.end()) o.sink_tokens = it->second;
    return sliding_window_attention_options(o);
  }

  // Lengths in steps of 256 tokens; windows doubling from 16 up to the longest length, with
  // the default window and DST's cap.
  AnalyticGrid analytic_grid(const AttentionPattern& pattern, int64_t longest_sample, int64_t dst_k_max) const override {
    AnalyticGrid grid{analytic_profile_lengths(256, longest_sample), {}};
    const int64_t longest = grid.seq_lens.back();
    for (int64_t w = 16; w < longest; w *= 2) grid.budgets.push_back(w);
    grid.budgets.push_back(longest);
    grid.budgets.push_back(std::min(options_of(pattern).window, longest));
    if (dst_k_max > 0) grid.budgets.push_back(std::min(dst_k_max, longest));
    std::sort(grid.budgets.begin(), grid.budgets.end());
    grid.budgets.erase(std::unique(grid.budgets.begin(), grid.budgets.end()), grid.budgets.end());
    return grid;
  }

  std::unique_ptr<AttentionSimulation> simulation(const AttentionPattern& pattern, const SimulationCoverage& coverage,
                                                  const std::string& /*manifest_file*/) const override {
    return std::make_unique<SlidingWindowSimulation>(options_of(pattern), coverage);
  }

  FittedCoverage fit_coverage(const AttentionPattern& /*pattern*/, const SimulationCoverage& /*coverage*/,
                              const std::filesystem::path& /*results_dir*/, const std::string& manifest_file,
                              const std::string& json_path, std::ostream& /*log*/) const override {
    throw ConfigError(manifest_file, json_path, "is given, but the sliding_window coverage model has no fit",
                      "give simulation.coverage.exponent instead");
  }
};

}  // namespace

const AttentionPatternPlugin& sliding_window_plugin() {
  static const SlidingWindowPlugin plugin;
  return plugin;
}

}  // namespace sb
