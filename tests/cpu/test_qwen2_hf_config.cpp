// config.json's rope settings: YaRN read as transformers reads it (its defaults and its
// attention-factor rule, computed here by hand from transformers' formulas), written so
// that reading it again gives the same settings; other scaling types are refused by name.
// That the resulting model matches transformers is tests/python/test_model_oracle.py's.
#include <gtest/gtest.h>

#include <cmath>

#include "models/qwen2/qwen2_hf_config.h"

namespace sb {
namespace {

using nlohmann::json;

json tiny_config() {
  return {{"model_type", "qwen2"},     {"vocab_size", 96},        {"hidden_size", 64},
          {"intermediate_size", 48},   {"num_hidden_layers", 2},  {"num_attention_heads", 4},
          {"num_key_value_heads", 2},  {"head_dim", 16},          {"max_position_embeddings", 256},
          {"rope_theta", 10000.0}};
}

TEST(Qwen2HfConfig, YarnAsQwenWritesItTakesTransformersDefaults) {
  json j = tiny_config();
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 64}};
  const Qwen2Config c = qwen2_config_from_hf_json(j, "config.json");
  ASSERT_TRUE(c.yarn.has_value());
  EXPECT_EQ(c.yarn->factor, 4.0);
  EXPECT_EQ(c.yarn->original_max_position_embeddings, 64);
  EXPECT_EQ(c.yarn->beta_fast, 32.0);
  EXPECT_EQ(c.yarn->beta_slow, 1.0);
  EXPECT_TRUE(c.yarn->truncate);
  EXPECT_DOUBLE_EQ(c.yarn->attention_factor, 0.1 * std::log(4.0) + 1.0);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(qwen2_config_from_hf_json(tiny_config(), "config.json").yarn.has_value());
}

TEST(Qwen2HfConfig, YarnInRopeParametersWithMscaleAndDefaultFactor) {
  json j = tiny_config();
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "yarn"},     {"rope_theta", 500000.0},     {"original_max_position_embeddings", 32},
                          {"mscale", 1.0},           {"mscale_all_dim", 0.5},      {"beta_fast", 0},
                          {"truncate", false}};
  const Qwen2Config c = qwen2_config_from_hf_json(j, "config.json");
  ASSERT_TRUE(c.yarn.has_value());
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.yarn->factor, 8.0) << "max positions / original positions";
  EXPECT_EQ(c.yarn->beta_fast, 32.0) << "0 means the default, as transformers' `or 32`";
  EXPECT_FALSE(c.yarn->truncate);
  EXPECT_DOUBLE_EQ(c.yarn->attention_factor, (0.1 * std::log(8.0) + 1.0) / (0.05 * std::log(8.0) + 1.0));
}

TEST(Qwen2HfConfig, YarnIsWrittenSoThatItReadsBackTheSame) {
  json j = tiny_config();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 2.5}, {"original_max_position_embeddings", 100},
                       {"beta_slow", 2.0},    {"attention_factor", 1.25}};
  const Qwen2Config c = qwen2_config_from_hf_json(j, "config.json");
  const Qwen2Config back = qwen2_config_from_hf_json(qwen2_config_to_hf_json(c), "resaved.json");
  ASSERT_TRUE(back.yarn.has_value());
  EXPECT_EQ(back.yarn->factor, 2.5);
  EXPECT_EQ(back.yarn->original_max_position_embeddings, 100);
  EXPECT_EQ(back.yarn->beta_fast, 32.0);
  EXPECT_EQ(back.yarn->beta_slow, 2.0);
  EXPECT_EQ(back.yarn->attention_factor, 1.25);
  EXPECT_EQ(back.yarn->truncate, c.yarn->truncate);
  EXPECT_FALSE(qwen2_config_to_hf_json(qwen2_config_from_hf_json(tiny_config(), "c.json")).contains("rope_scaling"));
}

TEST(Qwen2HfConfig, OtherScalingIsRefusedNamingTheKey) {
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    json j = tiny_config();
    j[key] = {{"rope_type", "linear"}, {"factor", 2.0}};
    try {
      qwen2_config_from_hf_json(j, "config.json");
      ADD_FAILURE() << key << ": linear scaling was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(key) + ".rope_type"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("linear"), std::string::npos) << e.what();
    }
  }
  json no_original = tiny_config();
  no_original["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
  EXPECT_THROW(qwen2_config_from_hf_json(no_original, "config.json"), std::invalid_argument);
}

}  // namespace
}  // namespace sb
