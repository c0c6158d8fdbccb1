// experiments/schema/manifest.schema.json and the parser agree: every key the parser
// accepts at an object is a property of the schema there and the other way round, and
// every object the schema describes is reached by the parser on some variant manifest.
// (tests/python/test_manifest_schema.py validates the checked-in manifests with
// jsonschema, an independent validator.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "harness/common/json_object_reader.h"
#include "harness/config/manifest.h"
#include "models/qwen2/qwen2_hf_config.h"

namespace sb {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// A file of experiments/schema/, read once.
const json& schema_file(const std::string& name) {
  static std::map<std::string, json> files;
  auto it = files.find(name);
  if (it == files.end()) {
    std::ifstream in(std::string(SB_SOURCE_DIR "/experiments/schema/") + name);
    it = files.emplace(name, json::parse(in)).first;
  }
  return it->second;
}

json load_schema() { return schema_file("manifest.schema.json"); }

// Follows $ref into $defs (of this schema, "#/$defs/x", or of a sibling file,
// "simulation.schema.json#/$defs/x") and picks the object (or array) alternative of
// anyOf/oneOf.
const json& resolve(const json& schema, const json& node) {
  if (node.contains("$ref")) {
    const std::string ref = node["$ref"];
    const size_t hash = ref.find('#');
    const std::string prefix = "/$defs/";
    const json& document = hash == 0 ? schema : schema_file(ref.substr(0, hash));
    return resolve(document, document["$defs"][ref.substr(hash + 1 + prefix.size())]);
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!node.contains(key)) continue;
    for (const json& alternative : node[key]) {
      const json& r = resolve(schema, alternative);
      if (r.contains("properties") || r.contains("items")) return r;
    }
  }
  return node;
}

// The schema node of a recorded path such as "$.methods[].dst".
const json& node_at(const json& schema, const std::string& path) {
  const json* node = &schema;
  std::stringstream stream(path.substr(1));  // drop "$"
  std::string part;
  while (std::getline(stream, part, '.')) {
    if (part.empty()) continue;
    bool array = false;
    if (part.size() > 2 && part.substr(part.size() - 2) == "[]") {
      array = true;
      part = part.substr(0, part.size() - 2);
    }
    const json& here = resolve(schema, *node);
    if (!here.contains("properties") || !here["properties"].contains(part)) {
      ADD_FAILURE() << "the schema has no \"" << part << "\" on the way to " << path;
      static const json empty = json::object();
      return empty;
    }
    node = &here["properties"][part];
    if (array) node = &resolve(schema, *node)["items"];
  }
  return resolve(schema, *node);
}

// Every object node of the schema with "properties", by path.
void schema_objects(const json& schema, const json& node, const std::string& path, std::set<std::string>& out) {
  const json& here = resolve(schema, node);
  if (here.contains("items")) schema_objects(schema, here["items"], path + "[]", out);
  if (!here.contains("properties")) return;
  out.insert(path);
  for (const auto& [key, child] : here["properties"].items()) schema_objects(schema, child, path + "." + key, out);
}

std::vector<json> variant_manifests(const fs::path& dir) {
  std::ofstream(dir / "lengths.txt") << "64\n";
  const json base = json::parse(R"({
    "name": "v", "description": "d", "seed": 1,
    "model": {"preset": "qwen2-test"},
    "data": {"source": "synthetic", "synthetic": {"task": "arithmetic", "vocab_size": 0, "prompt_tokens": 2,
             "max_stride": 2, "lengths": "mixture", "length_scale": 1.0,
             "length_mixture": [{"weight": 1, "min_tokens": 8, "max_tokens": 16}]}},
    "parallelism": {"dp": 1, "pp": 1, "tp": 1, "stage_layers": [2], "timeout_s": 30, "bucket_mb": 8},
    "checkpoint": {"every_iterations": 0, "keep_last": 2, "at_end": true, "write_timeout_s": 60},
    "train": {"iterations": 3, "lora": {"rank": 2, "alpha": 4, "dropout": 0.1, "target_modules": ["q_proj"]}},
    "method_defaults": {"attention": {"name": "moba", "block_size": 4, "top_k": 2}, "batching": "sequential",
                        "budget": "fixed", "dst": {"anchor": "mean", "p": 0.1, "k_min": 1, "k_max": 4,
                        "bottleneck": "largest", "raise": "dp_slack"}, "sab": {"ema_alpha": 0.3}, "profile": "/p.json",
                        "latency_calibration": {"ema_alpha": 0.3}},
    "methods": [{"name": "a", "preset": "sab+dst", "attention": {"name": "moba", "top_k": 2},
                 "dst": {"p": 0.2}, "sab": {"ema_alpha": 0.1}, "profile": "/q.json",
                 "latency_calibration": {"ema_alpha": 0.5}},
                {"name": "b", "attention": "dense", "batching": "lbb", "budget": "fixed"}],
    "baseline": "b",
    "sweep": {"seed": [1, 2]},
    "cluster": {"preset": "h20", "gpus_per_node": 4, "intra_node": {"alpha_us": 2, "bandwidth_gbps": 3000},
                "inter_node": {"alpha_us": 8, "bandwidth_gbps": 200}, "memory_bandwidth_gbps": 30000,
                "device": "h20"},
    "simulation": {"profile": {"analytic": {"device": "h200", "matmul_efficiency": 0.4, "attention_efficiency": 0.2}},
                   "coverage": {"model": "zipf", "exponent": 0.8}, "latency_noise": {"sigma": 0.05, "rank_sigma": 0.03, "fit_from": "/r"},
                   "forward_fraction": 0.3, "optimizer_ms": 2}
  })");
  std::vector<json> variants{base};
  json retrieval = base;
  retrieval["data"]["synthetic"] = {{"task", "retrieval"}, {"key_tokens", 2}, {"answer_tokens", 3},
                                    {"lengths", "file"}, {"length_file", (dir / "lengths.txt").string()}};
  variants.push_back(retrieval);
  json copy = base;
  copy["data"]["synthetic"] = {{"task", "copy"}, {"lag", 3}, {"lengths", "file"}, {"length_file", (dir / "lengths.txt").string()}};
  variants.push_back(copy);
  json evaluated = base;
  evaluated["eval"] = json::parse(R"({
    "chat": false, "system_prompt": null, "jieba_dir": "/j", "repetition_penalty": 1.1,
    "longbench": {"data": "/lb", "config": "/cfg", "tasks": ["qasper"], "longbench_e": false, "max_length": 100,
                  "limit": 1},
    "longbench_v2": {"data": "/v2.json", "config": "/cfg", "max_length": 100, "max_new_tokens": 8, "limit": 1},
    "niah": {"haystack": "synthetic", "lengths": [64], "depths": [50], "samples": 1, "max_new_tokens": 4, "seed": 1},
    "heldout": {"data": "/h.jsonl", "max_length": 64, "limit": 1, "stride": 32, "bucket_tokens": 16},
    "zeroshot": {"data": "/zs", "tasks": ["piqa"], "limit": 2, "batch_tokens": 512},
    "ruler": {"lengths": [4096], "samples": 2, "tasks": ["niah_single_1", "cwe", "qa_1", "qa_2"],
              "haystack": "/pg.json", "squad": "/squad.json", "hotpotqa": "/hotpot.json", "cwe_words": "/ew.json",
              "words_dir": "/ww", "seed": 42},
    "synthetic": {"samples": 4, "dense_reference": false},
    "coverage": {"samples": 2, "block_size": 16, "top_k": 2, "k_max": 4, "p": [0.1], "before": false}})");
  variants.push_back(evaluated);
  json jsonl = base;
  jsonl["data"] = {{"source", "jsonl"},
                   {"jsonl", {{"path", "/d.jsonl"}, {"tokenizer", "/t.json"}, {"too_long", "skip"}, {"shuffle", false}}}};
  variants.push_back(jsonl);
  json tokenized = base;
  tokenized["data"] = {{"source", "tokenized"}, {"tokenized", {{"path", "/cache"}, {"too_long", "truncate"}, {"shuffle", true}}}};
  variants.push_back(tokenized);
  // A pretrained folder of the preset's architecture (parsing reads its config.json).
  fs::create_directories(dir / "model");
  std::ofstream(dir / "model" / "config.json") << qwen2_config_to_hf_json(qwen2_preset("qwen2-test")).dump();
  json pretrained = base;
  pretrained["model"]["from"] = (dir / "model").string();
  variants.push_back(pretrained);
  json profile_file = base;
  profile_file["simulation"]["profile"] = {{"file", "/profile.json"}};
  variants.push_back(profile_file);
  json overhead = base;  // replaces optimizer_ms, which it may not appear beside
  overhead["simulation"].erase("optimizer_ms");
  overhead["simulation"]["iteration_overhead"] = {{"ms", 20}, {"fit_from", "/r"}};
  overhead["simulation"]["ring_compute"] = {{"factor", 0.9}, {"step_ms_per_token", 0.01}, {"fit_from", "/r"}};
  variants.push_back(overhead);
  json vertical_slash = base;  // every key of the vertical_slash attention
  vertical_slash["methods"][1]["attention"] = {
      {"name", "vertical_slash"}, {"budget", "top_k"}, {"p", 0.9}, {"vertical_count", 10}, {"slash_count", 20},
      {"max_verticals", 100}, {"max_slashes", 100}, {"sink_tokens", 3}, {"local_window", 4}, {"last_queries", 8}};
  vertical_slash["method_defaults"]["attention"] = {{"name", "vertical_slash"}, {"budget", "top_p"}, {"p", 0.8},
                                                    {"vertical_count", 1}, {"slash_count", 1}, {"max_verticals", 9},
                                                    {"max_slashes", 9}, {"sink_tokens", 1}, {"local_window", 1},
                                                    {"last_queries", 4}};
  variants.push_back(vertical_slash);
  json scaled = base;
  scaled["model"]["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 64}};
  variants.push_back(scaled);
  json interleaved = base;
  interleaved["interleave"] = {{"block_iterations", 5}};
  variants.push_back(interleaved);
  return variants;
}

TEST(ManifestSchema, ParserKeysAndSchemaPropertiesAgree) {
  const json schema = load_schema();
  const fs::path dir = fs::temp_directory_path() / ("sb_schema_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  JsonKeyRecorder recorder;
  for (const json& manifest : variant_manifests(dir)) ASSERT_NO_THROW(parse_manifest(manifest, "variant.json"));
  fs::remove_all(dir);

  for (const auto& [path, keys] : recorder.keys()) {
    const json& node = node_at(schema, path);
    std::set<std::string> properties;
    if (node.contains("properties")) {
      for (const auto& [key, _] : node["properties"].items()) properties.insert(key);
    }
    EXPECT_EQ(keys, properties) << "at " << path;
  }
  std::set<std::string> objects;
  schema_objects(schema, schema, "$", objects);
  for (const std::string& path : objects) {
    EXPECT_EQ(recorder.keys().count(path), 1u) << "the schema describes " << path << " but no variant reached it";
  }
}

}  // namespace
}  // namespace sb
