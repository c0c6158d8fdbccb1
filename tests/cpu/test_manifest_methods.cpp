// The manifest's methods: presets for the Table I rows, method_defaults applied only
// where they apply, strictness on keys that do not apply, the profile requirement of
// sab and dst, the baseline, and the resolved form's round trip.
#include <gtest/gtest.h>

#include "common/errors.h"
#include "harness/config/manifest.h"
#include "tests/support/manifest_error_path.h"
#include "harness/patterns/attention_patterns.h"

namespace sb {
namespace {

using nlohmann::json;

json manifest_with(const json& methods, const json& defaults = nullptr) {
  json j{{"name", "t"},
         {"model", {{"preset", "qwen2-test"}}},
         {"data", {{"synthetic", {{"length_mixture", {{{"min_tokens", 8}, {"max_tokens", 16}}}}}}}},
         {"train", {{"iterations", 3}}},
         {"methods", methods}};
  if (!defaults.is_null()) j["method_defaults"] = defaults;
  return j;
}

TEST(ManifestMethods, PresetsAreTheTableOneRows) {
  const json defaults{{"attention", {{"name", "moba"}, {"block_size", 64}, {"top_k", 8}}},
                      {"profile", "/p.json"},
                      {"dst", {{"p", 0.2}}},
                      {"sab", {{"ema_alpha", 0.5}}}};
  json methods = json::array();
  for (const std::string preset : {"baseline", "dst", "sab", "sab+dst", "lbb", "lbb+dst", "dense"}) {
    std::string name = preset;
    for (char& c : name) c = c == '+' ? '_' : c;
    methods.push_back({{"name", name}, {"preset", preset}});
  }
  const Manifest m = parse_manifest(manifest_with(methods, defaults), "m.json");
  const auto row = [&](size_t i) {
    const MethodSection& s = m.methods[i];
    return s.attention.name() + "/" + batching_kind_options().name_of(s.batching) + "/" + budget_kind_options().name_of(s.budget);
  };
  EXPECT_EQ(row(0), "moba/sequential/fixed");
  EXPECT_EQ(row(1), "moba/sequential/dst");
  EXPECT_EQ(row(2), "moba/sab/fixed");
  EXPECT_EQ(row(3), "moba/sab/dst");
  EXPECT_EQ(row(4), "moba/lbb/fixed");
  EXPECT_EQ(row(5), "moba/lbb/dst");
  EXPECT_EQ(row(6), "dense/sequential/fixed");
  EXPECT_EQ(attention_to_json(m.methods[0].attention).at("block_size"), 64);  // from method_defaults
  EXPECT_EQ(m.methods[1].dst.p, 0.2);
  EXPECT_EQ(m.methods[1].dst.k_max, 16);  // 2 x top_k
  EXPECT_EQ(m.methods[3].sab.ema_alpha, 0.5);
  EXPECT_EQ(attention_to_json(m.methods[6].attention), (json{{"name", "dense"}}));  // dense: moba parameters not taken
  EXPECT_EQ(m.baseline, "baseline");  // the first method
  const json resolved = manifest_to_json(m);
  EXPECT_FALSE(resolved["methods"][0].contains("dst"));
  EXPECT_FALSE(resolved.contains("method_defaults"));
  EXPECT_EQ(manifest_to_json(parse_manifest(resolved, "resolved.json")), resolved);
}

TEST(ManifestMethods, OwnKeysOverrideThePresetAndMustApply) {
  const json base{{"name", "x"}, {"preset", "sab+dst"}, {"profile", "/p.json"},
                  {"attention", {{"name", "moba"}, {"top_k", 4}}}};
  json j = base;
  j["budget"] = "fixed";
  const Manifest m = parse_manifest(manifest_with(json::array({j})), "m.json");
  EXPECT_EQ(m.methods[0].budget, BudgetKind::kFixed);
  EXPECT_EQ(m.methods[0].batching, BatchingKind::kSab);
  j["dst"] = {{"p", 0.2}};  // dst parameters on a fixed budget
  EXPECT_EQ(test::manifest_error_path(manifest_with(json::array({j}))), "$.methods[0].dst");
  j = base;
  j["sab"] = {{"ema_alpha", 0}};
  EXPECT_EQ(test::manifest_error_path(manifest_with(json::array({j}))), "$.methods[0].sab.ema_alpha");
  j = base;
  j["dst"] = {{"k_min", 5}};  // above top_k 4
  EXPECT_EQ(test::manifest_error_path(manifest_with(json::array({j}))), "$.methods[0].dst.k_min");
  j = {{"name", "x"}, {"attention", {{"name", "dense"}, {"top_k", 4}}}};
  EXPECT_EQ(test::manifest_error_path(manifest_with(json::array({j}))), "$.methods[0].attention.top_k");
  j = {{"name", "x"}, {"preset", "sab+"}};
  EXPECT_EQ(test::manifest_error_path(manifest_with(json::array({j}))), "$.methods[0].preset");
}

TEST(ManifestMethods, SabAndDstNeedAProfileAndDstNeedsMoba) {
  EXPECT_EQ(test::manifest_error_path(manifest_with(json::array({{{"name", "x"}, {"preset", "sab"}}}))), "$.methods[0].profile");
  EXPECT_EQ(test::manifest_error_path(manifest_with(json::array({{{"name", "x"}, {"budget", "dst"}, {"profile", "/p.json"}}}))),
            "$.methods[0].budget");
  EXPECT_EQ(test::manifest_error_path(manifest_with(json::array({{{"name", "x"}, {"preset", "lbb"}}}))), "(no error)");
}

TEST(ManifestMethods, VerticalSlashTakesItsDefaultsAndSparseBalancesBudgetsInKeptKeys) {
  const json defaults{{"attention", {{"name", "vertical_slash"}, {"p", 0.8}, {"block_size", 16}, {"sink_tokens", 4},
                                     {"expected_keys", 200}}},
                      {"profile", "/p.json"},
                      {"dst", {{"p", 0.2}}}};
  const json methods = json::array({{{"name", "vs"}},
                                    {{"name", "vs_dst"}, {"budget", "dst"}, {"batching", "sab"}},
                                    {{"name", "capped"}, {"budget", "dst"}, {"dst", {{"k_min", 32}, {"k_max", 512}}}},
                                    {{"name", "moba"}, {"attention", "moba"}}});
  const Manifest m = parse_manifest(manifest_with(methods, defaults), "m.json");
  const json params = attention_to_json(m.methods[0].attention);
  EXPECT_EQ(params.at("name"), "vertical_slash");
  EXPECT_EQ(params.at("p"), 0.8);  // from method_defaults
  EXPECT_EQ(params.at("block_size"), 16);
  EXPECT_EQ(params.at("sink_tokens"), 4);
  EXPECT_EQ(params.at("expected_keys"), 200);
  EXPECT_EQ(m.methods[1].budget, BudgetKind::kDst);
  EXPECT_EQ(m.methods[1].dst.p, 0.2);
  EXPECT_EQ(m.methods[1].dst.k_min, 1);
  EXPECT_EQ(m.methods[1].dst.k_max, int64_t{1} << 20);  // kept keys per query: no cap of its own
  EXPECT_EQ(m.methods[2].dst.k_min, 32);
  EXPECT_EQ(m.methods[2].dst.k_max, 512);
  EXPECT_EQ(attention_to_json(m.methods[3].attention).at("block_size"), 256);  // moba: the pattern's keys not taken
  const json resolved = manifest_to_json(m);
  EXPECT_EQ(resolved["methods"][0]["attention"]["expected_keys"], 200);
  EXPECT_EQ(manifest_to_json(parse_manifest(resolved, "resolved.json")), resolved);
  // k_max below k_min is refused; DST over the pattern under context parallelism is not
  // (the ring runs the budget search, vertical_slash_ring_budget.h).
  json crossed = manifest_with(json::array({{{"name", "x"}, {"budget", "dst"}, {"dst", {{"k_min", 64}, {"k_max", 32}}}}}),
                               defaults);
  EXPECT_EQ(test::manifest_error_path(crossed), "$.methods[0].dst.k_max");
  json ring = manifest_with(json::array({{{"name", "x"}, {"budget", "dst"}}}), defaults);
  ring["parallelism"] = {{"cp", 2}};
  try {
    check_runnable_by_trainer(parse_manifest(ring, "m.json"));
  } catch (const ConfigError& e) {
    EXPECT_NE(e.json_path(), "$.methods[0].budget") << e.what();
  }
  // Under tensor parallelism the pattern's own rule runs per head, and DST's budget level,
  // one per sequence over every head's lists, is searched by the TP ranks together
  // (vertical_slash_sharded_budget.h), alone and beside CP.
  json tp = manifest_with(json::array({{{"name", "rule"}}, {{"name", "sab"}, {"batching", "sab"}},
                                       {{"name", "dst"}, {"budget", "dst"}}}),
                          defaults);
  tp["model"] = {{"preset", "qwen2-test-kv4"}};
  tp["parallelism"] = {{"tp", 2}};
  EXPECT_NO_THROW(check_runnable_by_trainer(parse_manifest(tp, "m.json")));
  tp["parallelism"]["cp"] = 2;
  EXPECT_NO_THROW(check_runnable_by_trainer(parse_manifest(tp, "m.json")));
}

TEST(ManifestMethods, LatencyCalibrationAppliesToMethodsWithAProfile) {
  const json defaults{{"attention", {{"name", "moba"}, {"top_k", 8}}}, {"latency_calibration", {{"ema_alpha", 0.5}}}};
  const json methods = json::array({{{"name", "a"}, {"preset", "sab"}, {"profile", "/p.json"}},
                                    {{"name", "b"}, {"preset", "lbb"}}});
  const Manifest m = parse_manifest(manifest_with(methods, defaults), "m.json");
  EXPECT_TRUE(m.methods[0].latency_calibration.enabled);
  EXPECT_EQ(m.methods[0].latency_calibration.ema_alpha, 0.5);
  EXPECT_FALSE(m.methods[1].latency_calibration.enabled);  // no profile: not taken
  const json resolved = manifest_to_json(m);
  EXPECT_EQ(resolved["methods"][0]["latency_calibration"]["ema_alpha"], 0.5);
  EXPECT_FALSE(resolved["methods"][1].contains("latency_calibration"));
  EXPECT_EQ(manifest_to_json(parse_manifest(resolved, "resolved.json")), resolved);
  // In the method itself: needs a profile, alpha in (0, 1].
  EXPECT_EQ(test::manifest_error_path(manifest_with(json::array({{{"name", "x"}, {"latency_calibration", json::object()}}}))),
            "$.methods[0].latency_calibration");
  EXPECT_EQ(test::manifest_error_path(manifest_with(json::array({{{"name", "x"}, {"profile", "/p.json"},
                                                   {"latency_calibration", {{"ema_alpha", 0}}}}}))),
            "$.methods[0].latency_calibration.ema_alpha");
  EXPECT_EQ(test::manifest_error_path(manifest_with(json::array({{{"name", "x"}}}), {{"latency_calibration", {{"alpha", 1}}}})),
            "$.method_defaults.latency_calibration.alpha");
}

TEST(ManifestMethods, BaselineMustNameAMethodAndDefaultsCannotNameOne) {
  json j = manifest_with(json::array({{{"name", "a"}}, {{"name", "b"}}}));
  j["baseline"] = "b";
  EXPECT_EQ(parse_manifest(j, "m.json").baseline, "b");
  j["baseline"] = "c";
  EXPECT_EQ(test::manifest_error_path(j), "$.baseline");
  EXPECT_EQ(test::manifest_error_path(manifest_with(json::array({{{"name", "a"}}}), {{"name", "x"}})), "$.method_defaults.name");
  EXPECT_EQ(test::manifest_error_path(manifest_with(json::array({{{"name", "a"}}}), {{"budgett", "x"}})), "$.method_defaults.budgett");
  EXPECT_EQ(test::manifest_error_path(manifest_with(json::array({{{"name", "a"}}}), {{"dst", {{"pp", 0.1}}}})),
            "$.method_defaults.dst.pp");
  EXPECT_EQ(test::manifest_error_path(manifest_with(json::array({{{"name", "a"}}}), {{"attention", {{"top_k", "8"}}}})),
            "$.method_defaults.attention.top_k");
}

}  // namespace
}  // namespace sb
