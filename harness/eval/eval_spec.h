#pragma once
// The `eval` block of a manifest: what to evaluate after training, parsed strictly
// (unknown keys and wrong types are ConfigErrors naming the JSON path). Every section is
// optional, but at least one must be given. Relative paths resolve against `base_dir`.
//
//   "eval": {
//     "chat": true,                    ChatML prompts (false: plain text, base models)
//     "system_prompt": "...",          system message; null: none; default Qwen2.5's
//     "jieba_dir": "...",              jieba's package folder (default: looked up)
//     "repetition_penalty": 1.0,       greedy decoding's penalty (models/qwen2/qwen2_generate.h; 1: off)
//     "longbench": {"data": DIR, "config": DIR, "tasks": [...] (default upstream's),
//                   "longbench_e": false, "max_length": 31500, "limit": 0},
//     "longbench_v2": {"data": FILE, "config": DIR, "max_length": 31500,
//                      "max_new_tokens": 128, "limit": 0},
//     "niah": {"haystack": "synthetic" | FILE, "lengths": [1024, 2048, 4096],
//              "depths": [0, 25, 50, 75, 100], "samples": 1, "max_new_tokens": 16,
//              "seed": 1234},
//     "heldout": {"data": FILE, "max_length": 4096, "limit": 0, "stride": 0,
//                 "bucket_tokens": 0},   (heldout_perplexity.h)
//     "ruler": {"lengths": [4096], "samples": 500, "tasks": [...] (default all with their
//               inputs), "haystack": "synthetic" | FILE, "squad": FILE, "hotpotqa": FILE,
//               "cwe_words": FILE, "words_dir": DIR, "seed": 42}   (ruler/ruler_eval.h)
//     "zeroshot": {"data": DIR, "tasks": [...] (default all seven), "limit": 0}
//                 lm-eval's zero-shot multiple choice (zeroshot/zeroshot_eval.h)
//     "synthetic": {"samples": 32, "dense_reference": true}   manifests with synthetic
//                  data only: held-out samples of the run's own task (synthetic_heldout.h)
//     "coverage": {"samples": 16, "block_size": B, "top_k": k0, "k_max": 0,
//                  "p": [0.1, 0.2, 0.3], "before": true}   synthetic data only: MoBA's
//                  coverage curve and DST floors (routing_coverage.h); block_size and
//                  top_k default to the run's MoBA attention (required for dense runs)
//   }

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>

#include "harness/eval/heldout_perplexity.h"
#include "harness/eval/longbench/longbench_predict.h"
#include "harness/eval/longbench/longbench_v2.h"
#include "harness/eval/niah.h"
#include "harness/eval/routing_coverage.h"
#include "harness/eval/ruler/ruler_eval.h"
#include "harness/eval/synthetic_heldout.h"
#include "harness/eval/zeroshot/zeroshot_eval.h"

namespace sb {

struct EvalSpec {
  ChatStyle chat;
  std::string jieba_dir;  // empty: locate_jieba_dir's search
  double repetition_penalty = 1.0;
  std::optional<LongBenchPredictOptions> longbench;  // out_dir is set by the suite
  std::optional<LongBenchV2Options> longbench_v2;
  std::optional<NiahOptions> niah;
  std::optional<HeldoutOptions> heldout;
  std::optional<ZeroShotOptions> zeroshot;  // out_dir and model_args are set by the suite
  std::optional<RulerOptions> ruler;        // out_dir is set by the suite
  std::optional<SyntheticHeldoutOptions> synthetic;
  std::optional<RoutingCoverageOptions> coverage;
};

// value: the "eval" object; path: its JSON path ("$.eval"); file: the manifest, for
// messages.
EvalSpec parse_eval_spec(const nlohmann::json& value, const std::string& path, const std::string& file,
                         const std::filesystem::path& base_dir);

// Every key with its value (defaults filled); parses back to the same spec.
nlohmann::json eval_spec_to_json(const EvalSpec& spec);

}  // namespace sb
