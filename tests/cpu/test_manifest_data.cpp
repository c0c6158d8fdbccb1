// The manifest's data section: task-specific keys, named length profiles with a scale,
// lengths from a file and JSONL SFT data, with paths resolved against the manifest's
// folder and a resolved manifest that parses back to itself.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/errors.h"
#include "harness/config/manifest.h"
#include "tests/support/manifest_error_path.h"

namespace sb {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json with_data(const json& data, int64_t capacity = 4096) {
  return json{{"name", "t"},
              {"model", {{"preset", "qwen2-test"}}},
              {"data", data},
              {"train", {{"iterations", 3}, {"max_tokens_per_microbatch", capacity}}},
              {"methods", json::array({{{"name", "dense"}}})}};
}

TEST(ManifestData, TaskSpecificKeysAreRejectedForTheOtherTask) {
  EXPECT_EQ(test::manifest_error_path(with_data({{"synthetic", {{"task", "retrieval"}, {"max_stride", 2}, {"lengths", "bimodal"}}}})),
            "$.data.synthetic.max_stride");
  EXPECT_EQ(test::manifest_error_path(with_data({{"synthetic", {{"key_tokens", 2}, {"length_mixture", {{{"min_tokens", 8}, {"max_tokens", 9}}}}}}})),
            "$.data.synthetic.key_tokens");
  EXPECT_EQ(test::manifest_error_path(with_data({{"synthetic", {{"lengths", "bimodal"}, {"length_mixture", json::array()}}}})),
            "$.data.synthetic.length_mixture");
  EXPECT_EQ(test::manifest_error_path(with_data({{"source", "jsonl"}, {"synthetic", json::object()}})), "$.data.synthetic");
  EXPECT_EQ(test::manifest_error_path(with_data({{"synthetic", {{"lengths", "chatqa2"}}}})), "$.data.synthetic.lengths");
  EXPECT_EQ(test::manifest_error_path(with_data({{"synthetic", {{"task", "retrieval"}, {"lag", 8}, {"lengths", "bimodal"}}}})),
            "$.data.synthetic.lag");
  EXPECT_EQ(test::manifest_error_path(with_data({{"synthetic", {{"task", "copy"}, {"answer_tokens", 8}, {"lengths", "bimodal"}}}})),
            "$.data.synthetic.answer_tokens");
  EXPECT_EQ(test::manifest_error_path(with_data({{"synthetic", {{"task", "copy"}, {"lag", 0}, {"lengths", "bimodal"}}}})),
            "$.data.synthetic.lag");
}

TEST(ManifestData, CopyTaskKeepsItsLagThroughTheResolvedManifest) {
  const json data{{"synthetic", {{"task", "copy"}, {"lag", 24}, {"length_mixture", {{{"min_tokens", 8}, {"max_tokens", 90}}}}}}};
  const Manifest m = parse_manifest(with_data(data), "m.json");
  EXPECT_EQ(m.data.synthetic.task, SyntheticTask::kCopy);
  EXPECT_EQ(m.data.synthetic.lag, 24);
  const json resolved = manifest_to_json(m);
  EXPECT_EQ(resolved["data"]["synthetic"]["lag"], 24);
  EXPECT_FALSE(resolved["data"]["synthetic"].contains("answer_tokens"));
  EXPECT_FALSE(resolved["data"]["synthetic"].contains("prompt_tokens"));
  EXPECT_EQ(manifest_to_json(parse_manifest(resolved, "resolved.json")), resolved);
}

TEST(ManifestData, ScaledProfileMustFitTheCapacityAndThePositions) {
  // bimodal up to 32768 tokens x 1/64 = 512.
  const json data{{"synthetic", {{"task", "retrieval"}, {"lengths", "bimodal"}, {"length_scale", 1.0 / 64}}}};
  EXPECT_EQ(test::manifest_error_path(with_data(data, 511)), "$.train.max_tokens_per_microbatch");
  const Manifest m = parse_manifest(with_data(data, 512), "m.json");
  EXPECT_EQ(m.data.synthetic.task, SyntheticTask::kRetrieval);
  EXPECT_EQ(m.data.synthetic.answer_tokens, 8);
  // Round trip of the resolved manifest; task-specific keys of the other task stay out.
  const json resolved = manifest_to_json(m);
  EXPECT_FALSE(resolved["data"]["synthetic"].contains("max_stride"));
  EXPECT_EQ(manifest_to_json(parse_manifest(resolved, "resolved.json")), resolved);
  // Unscaled, 32768 tokens exceed qwen2-test's positions.
  EXPECT_EQ(test::manifest_error_path(with_data({{"synthetic", {{"lengths", "bimodal"}}}}, 40000)), "$.data.synthetic");
}

TEST(ManifestData, PathsResolveAgainstTheManifestFolder) {
  const fs::path dir = fs::temp_directory_path() / ("sb_manifest_data_" + std::to_string(::getpid()));
  fs::create_directories(dir / "data");
  std::ofstream(dir / "data" / "lengths.txt") << "10\n20\n";
  json manifest = with_data({{"synthetic", {{"lengths", "file"}, {"length_file", "data/lengths.txt"}}}});
  std::ofstream(dir / "m.json") << manifest.dump();
  const Manifest m = load_manifest(dir / "m.json");
  EXPECT_EQ(fs::path(m.data.synthetic.length_file), fs::absolute(dir / "data" / "lengths.txt").lexically_normal());

  json jsonl = with_data({{"source", "jsonl"}, {"jsonl", {{"path", "data/sft.jsonl"}, {"tokenizer", "/abs/tokenizer.json"}}}});
  std::ofstream(dir / "j.json") << jsonl.dump();
  const Manifest j = load_manifest(dir / "j.json");
  EXPECT_EQ(fs::path(j.data.jsonl.path), fs::absolute(dir / "data" / "sft.jsonl").lexically_normal());
  EXPECT_EQ(j.data.jsonl.tokenizer, "/abs/tokenizer.json");
  EXPECT_EQ(j.data.jsonl.too_long, TooLongRule::kError);
  const json resolved = manifest_to_json(j);
  EXPECT_EQ(manifest_to_json(parse_manifest(resolved, "resolved.json")), resolved);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sb
