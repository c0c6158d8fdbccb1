#include "harness/eval/routing_coverage.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

#include "harness/data/dataset.h"
#include "harness/eval/synthetic_heldout.h"
#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/patterns/moba/moba_attention_backend.h"

namespace sb {

std::pair<int64_t, int64_t> routing_geometry(const AttentionOptions& attention) {
  const AttentionPattern& pattern = attention.pattern();
  if (!pattern.reports_coverage_curve()) return {0, 0};
  return {pattern.budget_unit_tokens(), pattern.default_budget()};
}
namespace {

using nlohmann::ordered_json;

// One (sample, layer) observation: its curve padded to the reported length, and its
// floor budget per p (computed once, averaged by every summary it enters).
struct CurveObservation {
  int64_t layer = 0;
  int64_t length = 0;
  std::vector<double> curve;
  std::vector<int64_t> floors;
};

// "0.1" for 0.1: the key a reader types.
std::string p_key(double p) {
  std::ostringstream out;
  out << p;
  return out.str();
}

// Mean curve and mean floors of the observations `take` accepts.
template <typename Take>
ordered_json summarise(const std::vector<CurveObservation>& all, const RoutingCoverageOptions& options,
                       int64_t length, Take take) {
  std::vector<double> curve(length, 0.0);
  std::vector<double> floors(options.p.size(), 0.0);
  int64_t n = 0;
  for (const CurveObservation& o : all) {
    if (!take(o)) continue;
    ++n;
    for (int64_t k = 0; k < length; ++k) curve[k] += o.curve[k];
    for (size_t i = 0; i < options.p.size(); ++i) floors[i] += static_cast<double>(o.floors[i]);
  }
  ordered_json j;
  for (double& c : curve) c /= static_cast<double>(std::max<int64_t>(n, 1));
  j["curve"] = curve;
  ordered_json floor = ordered_json::object();
  for (size_t i = 0; i < options.p.size(); ++i) {
    floor[p_key(options.p[i])] = floors[i] / static_cast<double>(std::max<int64_t>(n, 1));
  }
  j["floor"] = floor;
  return j;
}

int64_t length_bucket(int64_t length) {
  int64_t bucket = 0;
  while ((int64_t{2} << bucket) <= length) ++bucket;
  return bucket;  // 2^bucket <= length < 2^(bucket + 1)
}

}  // namespace

int64_t coverage_floor_of_curve(const std::vector<double>& curve, double p, int64_t k0) {
  return moba_coverage_floor_k(curve, 1.0 - p, k0);
}

ordered_json routing_coverage(Qwen2ForCausalLM& model, const Dataset& data, const RoutingCoverageOptions& options) {
  if (options.samples < 1) throw std::invalid_argument("routing_coverage: samples must be >= 1");
  if (options.block_size < 1 || options.top_k < 1) {
    throw std::invalid_argument("routing_coverage: block_size and top_k must be resolved (>= 1)");
  }
  for (double p : options.p) {
    if (!(p >= 0.0 && p < 1.0)) throw std::invalid_argument("routing_coverage: every p must be in [0, 1)");
  }
  c10::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const std::shared_ptr<AttentionBackend> own = model->attention_backend_ptr();
  auto moba = std::make_shared<MobaAttention>(options.block_size, options.top_k, MobaCudaKernel::kAuto,
                                              moba_gate_options().from_name(options.gate.empty() ? "block" : options.gate));
  AttentionBudgetRequest request;
  // The floor needs the curve up to k0 at least.
  request.coverage_curve_up_to =
      options.k_max > 0 ? std::max(options.k_max, options.top_k) : std::numeric_limits<int32_t>::max();
  moba->set_budget_request(request);
  model->set_attention_backend(moba);
  const auto device = model->parameters().front().device();

  std::vector<CurveObservation> observations;
  int64_t longest = 0;
  try {
    for (int64_t i = 0; i < options.samples; ++i) {
      const Sample s = data.sample(kSyntheticHeldoutFirstId + i);
      const int64_t n = s.length();
      const at::Tensor tokens = at::tensor(s.tokens, at::kLong).to(device);
      // Only the routing statistics count: one row's logits, not [n, V].
      model->forward_rows(tokens, at::arange(n, tokens.options()), PackedSequences::from_lengths({n}),
                          at::full({1}, n - 1, tokens.options()));
      for (AttentionLayerStats& stats : moba->take_layer_stats()) {
        longest = std::max<int64_t>(longest, stats.coverage_curve.size());
        observations.push_back(CurveObservation{stats.layer, n, std::move(stats.coverage_curve), {}});
      }
    }
  } catch (...) {
    model->set_attention_backend(own);
    if (was_training) model->train();
    throw;
  }
  model->set_attention_backend(own);
  if (was_training) model->train();

  // Every curve to one length: C(k) = C(K_s) (= 1) from the sample's K_s on.
  const int64_t length = options.k_max > 0 ? options.k_max : longest;
  for (CurveObservation& o : observations) {
    const double last = o.curve.empty() ? 1.0 : o.curve.back();
    o.curve.resize(std::max<int64_t>(length, options.top_k), last);
    for (double p : options.p) o.floors.push_back(coverage_floor_of_curve(o.curve, p, options.top_k));
  }

  ordered_json result;
  result["block_size"] = options.block_size;
  result["top_k"] = options.top_k;
  result["gate"] = options.gate.empty() ? "block" : options.gate;
  result["samples"] = options.samples;
  std::vector<int64_t> ks(length);
  for (int64_t k = 0; k < length; ++k) ks[k] = k + 1;
  result["k"] = ks;
  const ordered_json overall = summarise(observations, options, length, [](const CurveObservation&) { return true; });
  result["curve"] = overall["curve"];
  result["floor"] = overall["floor"];

  std::set<int64_t> layers;
  for (const CurveObservation& o : observations) layers.insert(o.layer);
  ordered_json per_layer = ordered_json::array();
  for (const int64_t layer : layers) {
    ordered_json j;
    j["layer"] = layer;
    const ordered_json s =
        summarise(observations, options, length, [&](const CurveObservation& o) { return o.layer == layer; });
    j["curve"] = s["curve"];
    j["floor"] = s["floor"];
    per_layer.push_back(j);
  }
  result["layers"] = per_layer;

  std::map<int64_t, int64_t> bucket_samples;  // bucket -> samples (each counted at its first layer)
  const int64_t first_layer = layers.empty() ? 0 : *layers.begin();
  for (const CurveObservation& o : observations) {
    if (o.layer == first_layer) ++bucket_samples[length_bucket(o.length)];
  }
  ordered_json buckets = ordered_json::array();
  for (const auto& [bucket, count] : bucket_samples) {
    ordered_json j;
    j["min_tokens"] = int64_t{1} << bucket;
    j["max_tokens"] = (int64_t{2} << bucket) - 1;
    j["samples"] = count;
    const ordered_json s = summarise(observations, options, length,
                                     [&](const CurveObservation& o) { return length_bucket(o.length) == bucket; });
    j["curve"] = s["curve"];
    j["floor"] = s["floor"];
    buckets.push_back(j);
  }
  result["buckets"] = buckets;
  return result;
}

}  // namespace sb
