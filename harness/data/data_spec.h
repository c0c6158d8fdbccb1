#pragma once
// The data a run trains on, as the manifest's `data` section gives it (parsed and
// resolved by harness/config/manifest.cpp; read by make_dataset).

#include <cstdint>
#include <string>
#include <vector>

#include "common/option_names.h"
#include "harness/data/length_profiles.h"

namespace sb {

// Synthetic SFT data (data.synthetic). Tasks:
//   "arithmetic": sequence i is start_i, start_i + s_i, start_i + 2 s_i, ... (mod vocab)
//     with s_i in [1, max_stride]; the first prompt_tokens tokens are the prompt (no
//     loss); everything after is determined by them, so a model can learn it quickly.
//   "retrieval": associative recall far back in the sequence (harness/data/retrieval_task.h):
//     only the answer_tokens at the end are trained, and they can only be predicted by
//     attending to where the key_tokens occurred earlier.
//   "copy": the first `lag` tokens are random (the prompt, no loss); every later token
//     repeats the one `lag` positions back. Every trained token needs one key block far
//     back, so a trained model's attention (and MoBA's routing) concentrates there, and
//     a budget that misses that block costs accuracy.
// Lengths: "mixture" (length_mixture), a named profile shaped like the paper's data
// ("bimodal", "longtail": harness/data/length_profiles.h), or "file" (one length per
// line of length_file, drawn uniformly); every length is multiplied by length_scale.
enum class SyntheticTask { kArithmetic, kRetrieval, kCopy };
const OptionNames<SyntheticTask>& synthetic_task_options();  // "arithmetic" | "retrieval" | "copy"

// What a JSONL conversation longer than max_tokens_per_microbatch does: stop the run with
// an error naming it, be left out, or be cut to the capacity.
enum class TooLongRule { kError, kSkip, kTruncate };
const OptionNames<TooLongRule>& too_long_options();  // "error" | "skip" | "truncate"

enum class DataSource { kSynthetic, kJsonl, kTokenized };
const OptionNames<DataSource>& data_source_options();  // "synthetic" | "jsonl" | "tokenized"

// Where synthetic lengths come from: length_mixture, a named profile, or length_file.
enum class LengthSource { kMixture, kProfile, kFile };

struct SyntheticDataSection {
  SyntheticTask task = SyntheticTask::kArithmetic;
  int64_t vocab_size = 0;  // 0 in the file means: the model's vocab_size (resolved)
  int64_t prompt_tokens = 4;   // arithmetic
  int64_t max_stride = 3;      // arithmetic
  int64_t key_tokens = 2;      // retrieval
  int64_t answer_tokens = 8;   // retrieval
  int64_t lag = 64;            // copy
  LengthSource lengths = LengthSource::kMixture;
  std::string length_profile;  // kProfile: a name from length_profiles.h ("bimodal", "longtail")
  double length_scale = 1.0;
  std::vector<LengthComponent> length_mixture;  // kMixture
  std::string length_file;                      // kFile (absolute once resolved)

  // The manifest's "lengths": "mixture", "file" or the profile's name.
  std::string lengths_name() const {
    return lengths == LengthSource::kMixture ? "mixture" : lengths == LengthSource::kFile ? "file" : length_profile;
  }
};

// SFT conversations from a JSONL file (data.jsonl; harness/data/jsonl_sft_dataset.h).
struct JsonlDataSection {
  std::string path;       // absolute once resolved
  std::string tokenizer;  // tokenizer.json, absolute once resolved
  TooLongRule too_long = TooLongRule::kError;
  bool shuffle = true;             // a new seeded permutation every epoch
};

// Conversations tokenised ahead of time with the model's own chat template
// (data.tokenized: a cache folder of scripts/data/tokenize_sft.py;
// harness/data/tokenized_sft_dataset.h).
struct TokenizedDataSection {
  std::string path;  // the cache folder, absolute once resolved
  TooLongRule too_long = TooLongRule::kError;
  bool shuffle = true;
};

struct DataSection {
  DataSource source = DataSource::kSynthetic;
  SyntheticDataSection synthetic;
  JsonlDataSection jsonl;
  TokenizedDataSection tokenized;
};

}  // namespace sb
