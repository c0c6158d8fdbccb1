#include "harness/latency/run_profiles/sim_profile.h"

#include "harness/patterns/attention_patterns.h"

#include <algorithm>

#include "common/errors.h"
#include "harness/latency/analytic_profile.h"
#include "harness/latency/latency_profile.h"
#include "models/qwen2/qwen2_config.h"

namespace sb {
namespace {

SimProfile from_file(const std::string& file, const std::string& where_file, const std::string& json_path) {
  SimProfile p;
  LatencyProfile profile;
  try {
    profile = load_latency_profile(file);
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw ConfigError(where_file, json_path, "cannot load the latency profile " + file + ": " + e.what(),
                      "measure one with `sparsebalance profile` or use an analytic profile");
  }
  p.kind = profile.kind;
  p.file = file;
  p.details = {{"device", profile.device}, {"attention", profile.attention}, {"block_size", profile.block_size()}};
  p.predictor = std::make_shared<LatencyPredictor>(std::move(profile));
  return p;
}

}  // namespace

nlohmann::json SimProfile::describe() const {
  nlohmann::json j = details;
  j["kind"] = kind;
  j["file"] = file;
  return j;
}

SimProfile load_sim_profile(const Manifest& m, int64_t longest_sample, const std::optional<std::string>& override_file) {
  if (override_file) return from_file(*override_file, "--profile", "");
  const MethodSection& method = m.methods.at(0);
  if (m.simulation && m.simulation->profile.source == SimProfileSource::kFile) {
    return from_file(m.simulation->profile.file, m.file, "$.simulation.profile.file");
  }
  if (m.simulation && m.simulation->profile.source == SimProfileSource::kAnalytic) {
    const AnalyticProfileSection& a = m.simulation->profile.analytic;
    DeviceThroughput device = device_throughput_preset(a.device);
    device.matmul_efficiency = a.matmul_efficiency;
    device.attention_efficiency = a.attention_efficiency;
    const AnalyticGrid grid = attention_plugin(method.attention)
                                  .analytic_grid(method.attention.pattern(), longest_sample,
                                                 method.budget == BudgetKind::kDst ? method.dst.k_max : 0);
    const std::vector<int64_t>& seq_lens = grid.seq_lens;
    const std::vector<int64_t>& budgets = grid.budgets;
    LatencyProfile profile = make_analytic_profile(m.model.config, method.attention.pattern(), seq_lens, budgets, device);
    SimProfile p;
    p.kind = profile.kind;
    p.details = {{"device", device.name},
                 {"peak_tflops", device.peak_tflops},
                 {"matmul_efficiency", device.matmul_efficiency},
                 {"attention_efficiency", device.attention_efficiency},
                 {"seq_lens", {{"first", seq_lens.front()}, {"last", seq_lens.back()}, {"count", seq_lens.size()}}},
                 {"budgets", {{"first", budgets.front()}, {"last", budgets.back()}}}};
    p.predictor = std::make_shared<LatencyPredictor>(std::move(profile));
    return p;
  }
  if (!method.profile.empty()) return from_file(method.profile, m.file, "$.methods[\"" + method.name + "\"].profile");
  throw ConfigError(m.file, "$.simulation.profile",
                    "no latency profile for method \"" + method.name + "\": the simulator needs one",
                    "add \"simulation\": {\"profile\": {\"analytic\": {\"device\": \"h200\"}}}, a method "
                    "\"profile\" file, or pass --profile FILE");
}

}  // namespace sb
