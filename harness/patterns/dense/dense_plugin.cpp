#include "harness/patterns/dense/dense_plugin.h"

#include "harness/patterns/dense/dense_simulation.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"

namespace sb {
namespace {

class DensePlugin : public AttentionPatternPlugin {
 public:
  std::string name() const override { return "dense"; }
  AttentionOptions parse(JsonObjectReader& /*r*/) const override { return dense_attention_options(); }
  nlohmann::json to_json(const AttentionPattern& /*pattern*/) const override { return {{"name", name()}}; }
  std::vector<AttentionBenchVariant> bench_variants() const override {
    return {{"flash", nlohmann::json::object(), true, true}};
  }
  AttentionOptions from_profile_fields(const std::map<std::string, int64_t>& /*fields*/) const override {
    return dense_attention_options();
  }
  std::unique_ptr<AttentionSimulation> simulation(const AttentionPattern& /*pattern*/,
                                                  const SimulationCoverage& /*coverage*/,
                                                  const std::string& /*manifest_file*/) const override {
    return std::make_unique<DenseSimulation>();
  }
};

}  // namespace

const AttentionPatternPlugin& dense_plugin() {
  static const DensePlugin plugin;
  return plugin;
}

}  // namespace sb
