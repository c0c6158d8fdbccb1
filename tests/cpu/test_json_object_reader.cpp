// Strict JSON object reading: every error names the JSON path and says how to fix it.
#include <gtest/gtest.h>

#include "harness/common/json_object_reader.h"

namespace sb {
namespace {

using nlohmann::json;

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(JsonObjectReader, ReadsRequiredAndOptionalWithDefaults) {
  json j = {{"a", 3}, {"b", "x"}};
  JsonObjectReader r(j, "$.s", "f.json");
  EXPECT_EQ(r.required<int64_t>("a"), 3);
  EXPECT_EQ(r.required<std::string>("b"), "x");
  EXPECT_DOUBLE_EQ(r.optional<double>("c", 2.5), 2.5);
  EXPECT_NO_THROW(r.finish());
}

TEST(JsonObjectReader, UnknownKeyNamesPathAndAllowedKeys) {
  json j = {{"a", 3}, {"typo", 1}};
  std::string msg = error_of([&] {
    JsonObjectReader r(j, "$.train", "m.json");
    r.required<int64_t>("a");
    r.optional<int64_t>("b", 0);
    r.finish();
  });
  EXPECT_NE(msg.find("m.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("$.train.typo"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"a\", \"b\""), std::string::npos) << msg;
}

TEST(JsonObjectReader, WrongTypeNamesPathAndExpectedType) {
  json j = {{"n", "40"}};
  std::string msg = error_of([&] {
    JsonObjectReader r(j, "$.train", "m.json");
    r.required<int64_t>("n");
  });
  EXPECT_NE(msg.find("$.train.n"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected an integer"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a string"), std::string::npos) << msg;
}

TEST(JsonObjectReader, IntegerIsNotAcceptedWhereAFloatWouldTruncate) {
  json j = {{"n", 3.5}, {"x", 3}};
  JsonObjectReader r(j, "$", "m.json");
  EXPECT_THROW(r.required<int64_t>("n"), ConfigError);
  EXPECT_DOUBLE_EQ(r.required<double>("x"), 3.0);  // integers are valid numbers
}

TEST(JsonObjectReader, MissingRequiredKey) {
  json j = json::object();
  std::string msg = error_of([&] {
    JsonObjectReader r(j, "$.model", "m.json");
    r.required<std::string>("preset");
  });
  EXPECT_NE(msg.find("$.model.preset"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
}

TEST(JsonObjectReader, ChoiceListsAllowedValues) {
  json j = {{"attention", "sparse-ish"}};
  std::string msg = error_of([&] {
    JsonObjectReader r(j, "$.methods[0]", "m.json");
    r.required_choice("attention", {"dense", "moba"});
  });
  EXPECT_NE(msg.find("$.methods[0].attention"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"dense\", \"moba\""), std::string::npos) << msg;
}

TEST(ResolveManifestPath, OnePlaceHasOneSpelling) {
  EXPECT_EQ(resolve_manifest_path("m.json", ""), "");
  EXPECT_EQ(resolve_manifest_path("m.json", "/models/base/"), "/models/base");
  EXPECT_EQ(resolve_manifest_path("m.json", "/models//base/./x/../"), "/models/base");
  EXPECT_EQ(resolve_manifest_path("m.json", "/"), "/");
  EXPECT_EQ(resolve_manifest_path("/no/such/m.json", "run/ckpt/"), resolve_manifest_path("/no/such/m.json", "run/ckpt"));
}

TEST(JsonObjectReader, NonObjectIsRejected) {
  json j = json::array();
  EXPECT_THROW(JsonObjectReader(j, "$.data", "m.json"), ConfigError);
}

}  // namespace
}  // namespace sb
