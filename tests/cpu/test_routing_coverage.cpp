// eval.coverage (harness/eval/routing_coverage.h): the curve equals, at every k, the
// coverage MoBA's selection gives when it runs that budget on the same layer inputs, and
// the floors equal the k_floor of DST's request, per (sample, layer), averaged; the
// suite writes the starting weights' curve beside the trained one; the manifest section
// parses strictly.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "common/errors.h"
#include "harness/config/manifest.h"
#include "harness/data/synthetic_dataset.h"
#include "harness/eval/eval_suite.h"
#include "harness/eval/routing_coverage.h"
#include "harness/eval/synthetic_heldout.h"
#include "kernels/attention/patterns/moba/moba_attention.h"
#include "models/qwen2/qwen2_config.h"
#include "tests/support/manifest_error_path.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"

namespace sb {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

SyntheticDataSection copy_task() {
  SyntheticDataSection s;
  s.task = SyntheticTask::kCopy;
  s.vocab_size = 128;
  s.lag = 20;
  s.length_mixture = {{1.0, 30, 100}};
  return s;
}

Qwen2ForCausalLM seeded_model(uint64_t seed) {
  at::manual_seed(seed);
  return Qwen2ForCausalLM(qwen2_preset("qwen2-test"),
                          std::shared_ptr<AttentionBackend>(dense_attention_options().make_backend()));
}

// The oracle's backend: each layer's output is MoBA at k0 (what routing_coverage runs),
// and beside it the layer's routing is run again at every budget k = 1 .. K_max and at
// DST's floor request, recording the coverage the selection gives and the floor.
class ProbingMoba : public AttentionBackend {
 public:
  ProbingMoba(int64_t block_size, int64_t k0, int64_t k_max, std::vector<double> ps)
      : block_size_(block_size), k0_(k0), k_max_(k_max), ps_(std::move(ps)) {}
  std::string name() const override { return "probing-moba"; }
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const PackedSequences& sequences,
                     double scale, int64_t layer) override {
    MobaParams params;
    params.block_size = block_size_;
    params.scale = scale;
    std::vector<double> at_k;
    for (int64_t budget = 1; budget <= k_max_; ++budget) {
      params.top_k = {budget};
      at_k.push_back(moba_attention(q, k, v, sequences, params).routing.coverage_mean);
    }
    coverage.push_back(at_k);
    std::vector<int64_t> floor;
    for (double p : ps_) {
      MobaParams floored = params;
      floored.top_k = {1};
      floored.coverage_floor_ratio = 1.0 - p;
      floored.coverage_reference_k = k0_;
      floor.push_back(moba_attention(q, k, v, sequences, floored).routing.k_floor);
    }
    floors.push_back(floor);
    layers.push_back(layer);
    params.top_k = {k0_};
    return moba_attention(q, k, v, sequences, params).out;
  }
  at::Tensor forward_cached(const at::Tensor&, const at::Tensor&, const at::Tensor&, double) override {
    throw std::logic_error("not used");
  }
  std::vector<std::vector<double>> coverage;  // per (sample, layer): C at k = 1 .. k_max
  std::vector<std::vector<int64_t>> floors;   // per (sample, layer): the floor per p
  std::vector<int64_t> layers;

 private:
  int64_t block_size_, k0_, k_max_;
  std::vector<double> ps_;
};

TEST(RoutingCoverage, CurveAndFloorsAreWhatTheBackendReportsAtEachBudget) {
  const SyntheticDataset data(copy_task(), 3);
  Qwen2ForCausalLM model = seeded_model(5);
  RoutingCoverageOptions options;
  options.samples = 4;
  options.block_size = 8;
  options.top_k = 4;
  options.p = {0.1, 0.3};
  const json result = json::parse(routing_coverage(model, data, options).dump());
  EXPECT_EQ(model->attention_backend_ptr()->name(), "dense") << "the model's own backend is restored";

  const std::vector<double> curve = result["curve"].get<std::vector<double>>();
  int64_t longest = 0;
  for (int64_t i = 0; i < 4; ++i) longest = std::max(longest, data.sample(kSyntheticHeldoutFirstId + i).length());
  ASSERT_EQ(static_cast<int64_t>(curve.size()), (longest + 7) / 8) << "k_max 0: every eligible block";

  auto probe = std::make_shared<ProbingMoba>(8, 4, static_cast<int64_t>(curve.size()), std::vector<double>{0.1, 0.3});
  model->set_attention_backend(probe);
  {
    c10::NoGradGuard no_grad;
    for (int64_t i = 0; i < 4; ++i) {
      const Sample s = data.sample(kSyntheticHeldoutFirstId + i);
      const at::Tensor tokens = at::tensor(s.tokens, at::kLong);
      model->forward(tokens, at::arange(s.length(), tokens.options()), PackedSequences::from_lengths({s.length()}));
    }
  }
  ASSERT_EQ(probe->coverage.size(), 8u);  // 4 samples x 2 layers
  for (size_t k = 1; k <= curve.size(); ++k) {
    double mean = 0;
    for (const auto& at_k : probe->coverage) mean += at_k[k - 1] / 8.0;
    EXPECT_NEAR(curve[k - 1], mean, 1e-12) << "k " << k;
  }
  EXPECT_NEAR(curve.back(), 1.0, 1e-12);
  EXPECT_LT(curve.front(), 0.8) << "non-vacuous: random weights spread the routing";
  for (size_t i = 0; i < 2; ++i) {
    double floor = 0;
    for (const auto& f : probe->floors) floor += static_cast<double>(f[i]) / 8.0;
    EXPECT_NEAR(result["floor"][i == 0 ? "0.1" : "0.3"].get<double>(), floor, 1e-12) << "p index " << i;
  }
  EXPECT_LT(result["floor"]["0.3"].get<double>(), result["floor"]["0.1"].get<double>());

  // Per layer and per length bucket: means of the same observations.
  ASSERT_EQ(result["layers"].size(), 2u);
  int64_t bucketed = 0;
  double weighted = 0;
  for (const auto& b : result["buckets"]) {
    bucketed += b["samples"].get<int64_t>();
    weighted += b["samples"].get<double>() * b["curve"][0].get<double>();
    EXPECT_LE(b["min_tokens"].get<int64_t>(), b["max_tokens"].get<int64_t>());
  }
  EXPECT_EQ(bucketed, 4);
  EXPECT_NEAR(weighted / 4.0, curve[0], 1e-12);
  EXPECT_NEAR((result["layers"][0]["curve"][0].get<double>() + result["layers"][1]["curve"][0].get<double>()) / 2,
              curve[0], 1e-12);

  // k_max fixes the curve's length; C stays 1 past a sample's blocks.
  options.k_max = 30;
  const json longer = json::parse(routing_coverage(model, data, options).dump());
  ASSERT_EQ(longer["curve"].size(), 30u);
  EXPECT_NEAR(longer["curve"][29].get<double>(), 1.0, 1e-12);
  EXPECT_EQ(longer["floor"], result["floor"]);
}

TEST(RoutingCoverage, TheSuiteWritesTheStartingWeightsBesideTheTrainedOnes) {
  const fs::path out = fs::temp_directory_path() / ("sb_routing_coverage_" + std::to_string(::getpid()));
  fs::remove_all(out);
  fs::create_directories(out);
  const SyntheticDataset data(copy_task(), 3);
  ModelFolder folder;
  folder.model = seeded_model(5);
  EvalSpec spec;
  spec.coverage = RoutingCoverageOptions{};
  spec.coverage->samples = 2;
  spec.coverage->block_size = 8;
  spec.coverage->top_k = 3;
  EvalRunInputs inputs;
  inputs.synthetic_data = &data;
  inputs.starting_model = [] { return seeded_model(6); };
  std::ostringstream log;
  const json columns = json::parse(run_eval_suite(folder, spec, out, log, inputs).dump());
  EXPECT_TRUE(columns.empty()) << "coverage adds no accuracy column";
  std::ifstream in(out / "coverage.json");
  const json written = json::parse(in);
  Qwen2ForCausalLM start = seeded_model(6);
  EXPECT_EQ(written["before"]["curve"], json::parse(routing_coverage(start, data, *spec.coverage).dump())["curve"]);
  EXPECT_EQ(written["after"]["curve"],
            json::parse(routing_coverage(folder.model, data, *spec.coverage).dump())["curve"]);
  EXPECT_NE(written["before"]["curve"], written["after"]["curve"]);

  spec.coverage->before = false;
  run_eval_suite(folder, spec, out, log, inputs);
  std::ifstream again(out / "coverage.json");
  EXPECT_FALSE(json::parse(again).contains("before"));
  spec.coverage->block_size = 0;  // unresolved: an error naming the section
  EXPECT_THROW(run_eval_suite(folder, spec, out, log, inputs), ConfigError);
  fs::remove_all(out);
}

json manifest_with_eval(const json& eval, const std::string& attention, const std::string& source = "synthetic") {
  json m{{"name", "t"},
         {"model", {{"preset", "qwen2-test"}}},
         {"train", {{"iterations", 3}, {"max_tokens_per_microbatch", 256}}},
         {"methods", json::array({{{"name", "m"}, {"attention", attention}}})},
         {"eval", eval}};
  if (source == "synthetic") {
    m["data"] = {{"synthetic", {{"task", "copy"}, {"lag", 16}, {"length_mixture", {{{"min_tokens", 20}, {"max_tokens", 90}}}}}}};
  } else {
    m["data"] = {{"source", "jsonl"}, {"jsonl", {{"path", "/x/sft.jsonl"}, {"tokenizer", "/x/tokenizer.json"}}}};
  }
  return m;
}

TEST(RoutingCoverage, TheManifestSectionParsesStrictlyAndRoundTrips) {
  const Manifest m = parse_manifest(manifest_with_eval({{"coverage", {{"samples", 4}, {"p", {0.2}}}}}, "moba"), "m.json");
  ASSERT_TRUE(m.eval && m.eval->coverage);
  EXPECT_EQ(m.eval->coverage->samples, 4);
  EXPECT_EQ(m.eval->coverage->p, std::vector<double>{0.2});
  EXPECT_EQ(m.eval->coverage->block_size, 0) << "resolved from the run's attention at evaluation";
  EXPECT_TRUE(m.eval->coverage->before);
  const json resolved = manifest_to_json(m);
  EXPECT_EQ(resolved["eval"]["coverage"]["k_max"], 0);
  EXPECT_EQ(manifest_to_json(parse_manifest(resolved, "resolved.json")), resolved);

  // Dense attention needs the section's own geometry; with it, it parses.
  EXPECT_EQ(test::manifest_error_path(manifest_with_eval({{"coverage", json::object()}}, "dense")), "$.eval");
  EXPECT_NO_THROW(parse_manifest(
      manifest_with_eval({{"coverage", {{"block_size", 16}, {"top_k", 4}}}}, "dense"), "m.json"));
  EXPECT_EQ(test::manifest_error_path(manifest_with_eval({{"coverage", json::object()}}, "moba", "jsonl")), "$.eval");
  EXPECT_EQ(test::manifest_error_path(manifest_with_eval({{"coverage", {{"p", {1.0}}}}}, "moba")), "$.eval.coverage.p");
  EXPECT_EQ(test::manifest_error_path(manifest_with_eval({{"coverage", {{"samples", 0}}}}, "moba")),
            "$.eval.coverage.samples");
  EXPECT_EQ(test::manifest_error_path(manifest_with_eval({{"coverage", {{"k", 3}}}}, "moba")), "$.eval.coverage.k");
}

}  // namespace
}  // namespace sb
