// --set PATH=VALUE: the value lands where the path says (the oracle: the same manifest
// written with that value in the file), JSON or plain text, methods by name or index;
// bad arguments and bad values are ConfigErrors that name --set.
#include <gtest/gtest.h>

#include <fstream>

#include "common/errors.h"
#include "harness/config/manifest.h"
#include "tests/support/run_command.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json two_methods() {
  return json::parse(R"({
    "name": "over", "seed": 5,
    "model": {"preset": "qwen2-test"},
    "data": {"synthetic": {"length_mixture": [{"min_tokens": 8, "max_tokens": 60}]}},
    "train": {"iterations": 4, "max_tokens_per_microbatch": 64},
    "methods": [{"name": "dense"},
                {"name": "dst", "attention": {"name": "moba", "block_size": 16, "top_k": 2},
                 "budget": "dst", "profile": "profiles/none.json"}]
  })");
}

fs::path write(const fs::path& dir, const json& j) {
  std::ofstream(dir / "m.json") << j.dump(2);
  return dir / "m.json";
}

Manifest load_with(const fs::path& file, const std::vector<std::string>& sets) {
  return load_manifest(file, parse_manifest_overrides(sets));
}

TEST(ManifestOverrides, EqualTheSameValueWrittenInTheFile) {
  const fs::path dir = test::fresh_temp_dir("manifest_overrides");
  const fs::path file = write(dir, two_methods());
  const Manifest set = load_with(file, {"train.lr=0.0002", "seed=9", "methods.dst.dst.p=0.3",
                                        "methods.1.attention.top_k=4", "data.synthetic.max_stride=2",
                                        "description=plain text, not JSON"});
  json written = two_methods();
  written["train"]["lr"] = 0.0002;
  written["seed"] = 9;
  written["methods"][1]["dst"] = {{"p", 0.3}};
  written["methods"][1]["attention"]["top_k"] = 4;
  written["data"]["synthetic"]["max_stride"] = 2;
  written["description"] = "plain text, not JSON";
  EXPECT_EQ(manifest_to_json(set), manifest_to_json(parse_manifest(written, file.string())));
  EXPECT_EQ(set.file, file.string());
  fs::remove_all(dir);
}

TEST(ManifestOverrides, ValuesAreJsonWhenTheyParseAndTextOtherwise) {
  EXPECT_EQ(parse_manifest_override("a=3").value, json(3));
  EXPECT_EQ(parse_manifest_override("a=true").value, json(true));
  EXPECT_EQ(parse_manifest_override("a=[1,2]").value, json::array({1, 2}));
  EXPECT_EQ(parse_manifest_override("a=\"3\"").value, json("3"));
  EXPECT_EQ(parse_manifest_override("model.from=/models/qwen2.5-0.5b").value, json("/models/qwen2.5-0.5b"));
  EXPECT_EQ(parse_manifest_override("a=x=y").value, json("x=y")) << "the first = separates";
  EXPECT_EQ(parse_manifest_override("a.b.c=1").path, "a.b.c");
}

TEST(ManifestOverrides, BadArgumentsNameTheFlag) {
  for (const char* bad : {"train.lr", "=3", "train..lr=1", "train.=1"}) {
    try {
      parse_manifest_override(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.file(), "--set") << bad;
      EXPECT_EQ(e.json_path(), bad);
    }
  }
  const fs::path dir = test::fresh_temp_dir("manifest_overrides_bad");
  const fs::path file = write(dir, two_methods());
  for (const char* bad : {"methods.sab.dst.p=0.1", "methods.5.attention=moba", "seed.x=1",
                          "methods.99999999999999999999.name=x"}) {
    try {
      load_with(file, {bad});
      ADD_FAILURE() << bad << " was applied";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.file(), "--set") << e.what();
    }
  }
  fs::remove_all(dir);
}

TEST(ManifestOverrides, AParserErrorSaysWhichSetGaveTheValue) {
  const fs::path dir = test::fresh_temp_dir("manifest_overrides_parse");
  const fs::path file = write(dir, two_methods());
  try {
    load_with(file, {"methods.dst.dst.p=7"});
    FAIL() << "p = 7 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), file.string());
    EXPECT_EQ(e.json_path(), "$.methods[1].dst.p");
    EXPECT_NE(e.problem().find("--set methods.dst.dst.p=7"), std::string::npos) << e.what();
  }
  try {
    load_with(file, {"train.learning_rate=0.1"});
    FAIL() << "an unknown key was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(e.problem().find("--set train.learning_rate=0.1"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sb
