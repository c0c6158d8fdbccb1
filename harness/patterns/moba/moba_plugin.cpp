#include "harness/patterns/moba/moba_plugin.h"

#include <algorithm>

#include "common/errors.h"
#include "harness/patterns/moba/moba_coverage_fit.h"
#include "harness/patterns/moba/moba_simulation.h"
#include "kernels/attention/patterns/moba/moba_pattern.h"

namespace sb {
namespace {

const MobaOptions& options_of(const AttentionPattern& pattern) {
  const auto* moba = dynamic_cast<const MobaPattern*>(&pattern);
  if (moba == nullptr) throw std::logic_error("moba plug-in: a " + pattern.name() + " pattern");
  return moba->options();
}

class MobaPlugin : public AttentionPatternPlugin {
 public:
  std::string name() const override { return "moba"; }
  std::vector<std::string> keys() const override { return {"block_size", "top_k", "gate", "cuda_kernel"}; }

  AttentionOptions parse(JsonObjectReader& r) const override {
    MobaOptions o;
    o.block_size = r.optional<int64_t>("block_size", o.block_size);
    o.top_k = r.optional<int64_t>("top_k", o.top_k);
    o.gate = r.optional_option("gate", o.gate, moba_gate_options());
    o.cuda_kernel = r.optional_option("cuda_kernel", o.cuda_kernel, moba_cuda_kernel_options());
    r.expect(o.block_size >= 1, "block_size", "must be >= 1", "e.g. 256 (the paper) or 64 at CPU scale");
    r.expect(o.top_k >= 1, "top_k", "must be >= 1", "e.g. 32 (the paper) or 8 at CPU scale");
    return moba_attention_options(o);
  }

  nlohmann::json to_json(const AttentionPattern& pattern) const override {
    const MobaOptions& o = options_of(pattern);
    nlohmann::json j{{"name", name()},
                     {"block_size", o.block_size},
                     {"top_k", o.top_k},
                     {"gate", moba_gate_options().name_of(o.gate)}};
    // Only when not the default, so that results resolved before the key existed still match.
    if (o.cuda_kernel != MobaCudaKernel::kAuto) j["cuda_kernel"] = moba_cuda_kernel_options().name_of(o.cuda_kernel);
    return j;
  }

  // Resolved manifests name the gate; those stored before they did ran the block gate.
  void upgrade_stored(nlohmann::json& attention) const override {
    if (attention.is_object() && !attention.contains("gate")) attention["gate"] = "block";
  }

  void check_default_keys(JsonObjectReader& r) const override {
    r.optional<int64_t>("block_size", 0);
    r.optional<int64_t>("top_k", 0);
    r.optional_choice("gate", "block", moba_gate_options().names());
    r.optional_choice("cuda_kernel", "auto", moba_cuda_kernel_options().names());
  }

  std::vector<AttentionFlag> profile_flags() const override {
    return {{"--block", "block_size", "Tokens per attention block (default: the pattern's)", true},
            {"--gate", "gate", "MoBA's gate: token (per query, MoBA's own) or block (per query block)", false}};
  }

  std::vector<AttentionFlag> command_flags() const override {
    std::vector<AttentionFlag> flags = profile_flags();
    flags.push_back({"--top-k", "top_k", "MoBA's budget k, the own block included (default: the pattern's)", false});
    return flags;
  }

  std::vector<AttentionBenchKey> bench_keys(const nlohmann::json& flags) const override {
    return {{"block_size", "--block", flags.at("block")}, {"top_k", "--top-k", flags.at("top_k")}};
  }

  std::vector<AttentionBenchVariant> bench_variants() const override {
    return {{"token", {{"gate", "token"}}, false, false},
            {"fused", {{"cuda_kernel", "fused"}}, false, true},
            {"varlen", {{"cuda_kernel", "flash_varlen"}}, false, true}};
  }

  AttentionOptions from_profile_fields(const std::map<std::string, int64_t>& fields) const override {
    MobaOptions o;
    const auto block = fields.find("block_size");
    if (block != fields.end() && block->second > 0) o.block_size = block->second;
    const auto gate = fields.find("token_gate");  // absent in profiles measured before the token gate
    o.gate = gate != fields.end() && gate->second != 0 ? MobaGate::kToken : MobaGate::kBlock;
    return moba_attention_options(o);
  }

  // Lengths in steps of the block, budgets every k up to max(k0, DST's cap).
  AnalyticGrid analytic_grid(const AttentionPattern& pattern, int64_t longest_sample, int64_t dst_k_max) const override {
    const MobaOptions& o = options_of(pattern);
    AnalyticGrid grid{analytic_profile_lengths(o.block_size, longest_sample), {}};
    for (int64_t k = 1; k <= std::max(o.top_k, dst_k_max); ++k) grid.budgets.push_back(k);
    return grid;
  }

  std::unique_ptr<AttentionSimulation> simulation(const AttentionPattern& pattern, const SimulationCoverage& coverage,
                                                  const std::string& /*manifest_file*/) const override {
    return std::make_unique<MobaSimulation>(options_of(pattern), coverage);
  }

  FittedCoverage fit_coverage(const AttentionPattern& pattern, const SimulationCoverage& coverage,
                              const std::filesystem::path& results_dir, const std::string& manifest_file,
                              const std::string& json_path, std::ostream& log) const override {
    const MobaOptions& o = options_of(pattern);
    const CoverageFit fit = fit_coverage_from_results(results_dir, o.block_size, o.gate, manifest_file, json_path);
    log << "coverage exponent fitted to " << fit.points << " (micro-batch, layer) coverages of " << fit.runs.size()
        << " measured runs under " << results_dir.string() << ": s = " << fit.exponent << " (RMSE " << fit.rmse
        << ")\n";
    FittedCoverage out{coverage, fit.runs, {{"points", fit.points}, {"rmse", fit.rmse}}};
    out.coverage.exponent = fit.exponent;
    return out;
  }
};

}  // namespace

const AttentionPatternPlugin& moba_plugin() {
  static const MobaPlugin plugin;
  return plugin;
}

}  // namespace sb
