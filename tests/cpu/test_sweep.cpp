// Sweep expansion: the grid over applicable axes only, stable readable names, every
// point a valid manifest, errors naming the axis, and dotted-path edits.
#include <gtest/gtest.h>

#include <set>

#include "common/errors.h"
#include "harness/config/manifest.h"
#include "harness/patterns/attention_patterns.h"

namespace sb {
namespace {

using nlohmann::json;

json ablation_manifest() {
  return json::parse(R"({
    "name": "ablation",
    "model": {"preset": "qwen2-test"},
    "data": {"synthetic": {"length_mixture": [{"min_tokens": 8, "max_tokens": 16}]}},
    "train": {"iterations": 3},
    "method_defaults": {"attention": {"name": "moba", "block_size": 4, "top_k": 2}, "profile": "/p.json"},
    "methods": [{"name": "baseline", "preset": "baseline"}, {"name": "sab_dst", "preset": "sab+dst"}],
    "sweep": {"methods.dst.anchor": ["mean", "min", "max"], "methods.dst.p": [0.1, 0.2], "seed": [1, 2]}
  })");
}

TEST(Sweep, MethodAxesApplyOnlyWhereTheFieldExists) {
  const auto runs = expand_runs(parse_manifest(ablation_manifest(), "m.json"));
  // baseline: 2 seeds; sab_dst: 3 anchors x 2 p x 2 seeds.
  ASSERT_EQ(runs.size(), 2u + 12u);
  EXPECT_EQ(runs[0].name, "baseline__seed=1");
  EXPECT_EQ(runs[1].name, "baseline__seed=2");
  EXPECT_TRUE(runs[0].is_baseline);
  EXPECT_EQ(runs[2].name, "sab_dst__anchor=mean__p=0.1__seed=1");
  EXPECT_EQ(runs[3].name, "sab_dst__anchor=mean__p=0.1__seed=2");
  // Axes sorted by path (anchor, p, seed), values in the order given: runs 2-5 mean,
  // 6-9 min, 10-13 max.
  EXPECT_EQ(runs[9].name, "sab_dst__anchor=min__p=0.2__seed=2");
  EXPECT_EQ(runs[13].name, "sab_dst__anchor=max__p=0.2__seed=2");
  EXPECT_FALSE(runs[13].is_baseline);
  std::set<std::string> names;
  for (const RunSpec& run : runs) {
    EXPECT_TRUE(names.insert(run.name).second) << run.name;
    ASSERT_EQ(run.manifest.methods.size(), 1u);
    EXPECT_TRUE(run.manifest.sweep.empty());
    EXPECT_EQ(run.manifest.baseline, run.manifest.methods[0].name);
    // The resolved manifest of a run reproduces exactly that run.
    const json resolved = manifest_to_json(run.manifest);
    EXPECT_EQ(manifest_to_json(parse_manifest(resolved, "r.json")), resolved);
  }
  const RunSpec& r = runs[9];
  EXPECT_EQ(r.manifest.methods[0].dst.anchor, DstAnchor::kMin);
  EXPECT_DOUBLE_EQ(r.manifest.methods[0].dst.p, 0.2);
  EXPECT_EQ(r.manifest.seed, 2);
  EXPECT_EQ(r.sweep_point, (json{{"methods.dst.anchor", "min"}, {"methods.dst.p", 0.2}, {"seed", 2}}));
  EXPECT_EQ(runs[1].sweep_point, (json{{"seed", 2}}));
}

TEST(Sweep, BadPointsFailAtLoadNamingTheAxis) {
  json j = ablation_manifest();
  j["sweep"]["methods.dst.anchor"] = {"mean", "median"};
  try {
    parse_manifest(j, "m.json");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.json_path(), "$.methods[0].dst.anchor");
    EXPECT_NE(std::string(e.what()).find("sweep point"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("median"), std::string::npos) << e.what();
  }
  j = ablation_manifest();
  j["sweep"] = {{"train.lerning_rate", {0.1}}};
  EXPECT_THROW(parse_manifest(j, "m.json"), ConfigError);
  j["sweep"] = {{"seed", json::array()}};
  EXPECT_THROW(parse_manifest(j, "m.json"), ConfigError);
  j["sweep"] = {{"methods.name", {"x"}}};
  EXPECT_THROW(parse_manifest(j, "m.json"), ConfigError);
  j["sweep"] = {{"data.synthetic.length_mixture.3.max_tokens", {9}}};  // no element 3
  EXPECT_THROW(parse_manifest(j, "m.json"), ConfigError);
}

TEST(Sweep, DottedPathsEditNestedValuesAndArrays) {
  json j = ablation_manifest();
  j["sweep"] = {{"data.synthetic.length_mixture.0.max_tokens", {12, 16}}, {"methods.attention.top_k", {1, 2}}};
  const auto runs = expand_runs(parse_manifest(j, "m.json"));
  ASSERT_EQ(runs.size(), 8u);  // both methods are MoBA: 2 x 2 each
  EXPECT_EQ(runs[0].name, "baseline__max_tokens=12__top_k=1");
  EXPECT_EQ(runs[0].manifest.data.synthetic.length_mixture[0].max_tokens, 12);
  EXPECT_EQ(attention_to_json(runs[0].manifest.methods[0].attention).at("top_k"), 1);
  json shorthand{{"methods", {{{"attention", "moba"}}}}};
  set_json_path(shorthand["methods"][0], "attention.top_k", 4);
  EXPECT_EQ(shorthand["methods"][0]["attention"], (json{{"name", "moba"}, {"top_k", 4}}));
  EXPECT_TRUE(has_json_path(shorthand, "methods.0.attention.top_k"));
  EXPECT_FALSE(has_json_path(shorthand, "methods.1"));
  EXPECT_EQ(sweep_value_text(json("a b/c")), "a-b-c");
}

TEST(Sweep, NoSweepMeansOneRunPerMethod) {
  json j = ablation_manifest();
  j.erase("sweep");
  const auto runs = expand_runs(parse_manifest(j, "m.json"));
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[1].name, "sab_dst");
  EXPECT_TRUE(runs[1].sweep_point.empty());
}

}  // namespace
}  // namespace sb
