#pragma once
// Needle in a haystack: can the model retrieve one fact hidden at depth d of a context of
// L tokens? Definitions (docs/evaluation.md, "Needle in a haystack"):
//   haystack  a text file (repeated as often as needed) or the synthetic generator: plain
//             English sentences drawn from a fixed grammar by a seeded generator; tokenized
//             once
//   needle    " The special magic number is: V." with V a 7-digit number drawn per cell and
//             sample from the seed
//   context   exactly L tokens: the first L - n haystack tokens (n = the needle's tokens)
//             with the needle's ids inserted at position round(d / 100 * (L - n)), moved
//             back to just after the nearest haystack token that ends a sentence (".")
//   prompt    instruction + context + question, in the chat style; the pieces are
//             tokenized separately and their ids concatenated, so the context keeps
//             exactly L tokens
//   answer    greedy decoding (max_new_tokens), decoded skipping special tokens
//   score     1 if V appears in the answer as a whole run of digits, else 0; a cell's score
//             is the mean over its samples; "mean" is the mean over all cells
// Output: <out>/niah.json (grid, written atomically) and <out>/niah_cells.jsonl (one line
// per cell and sample, resumable). scripts/plot_niah.py draws the heatmap.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "harness/eval/longbench/longbench_prompt.h"
#include "harness/eval/model_folder.h"

namespace sb {

struct NiahOptions {
  std::string haystack = "synthetic";  // "synthetic" or a text file
  std::vector<int64_t> lengths = {1024, 2048, 4096};  // context tokens L
  std::vector<double> depths = {0, 25, 50, 75, 100};  // percent
  int64_t samples = 1;                                // needles per cell
  int64_t max_new_tokens = 16;
  uint64_t seed = 1234;
  ChatStyle chat;
  double repetition_penalty = 1.0;  // models/qwen2/qwen2_generate.h; 1: off
  std::filesystem::path out_dir;
};

// The synthetic haystack: `sentences` sentences from the seeded generator.
std::string niah_synthetic_haystack(uint64_t seed, int64_t sentences);

// 1.0 if `value` is one of the maximal digit runs of `answer`, else 0.0.
double niah_score(const std::string& answer, const std::string& value);

// Context ids of exactly `length` tokens with the needle at `depth` percent; *position is
// where the needle starts. std::invalid_argument when the needle does not fit.
std::vector<int64_t> niah_context_ids(const std::vector<int64_t>& haystack_ids, const std::vector<int64_t>& needle_ids,
                                      const std::vector<bool>& ends_sentence, int64_t length, double depth,
                                      int64_t* position);

// Runs the grid (resuming), writes niah.json, returns it.
nlohmann::ordered_json run_niah(ModelFolder& model, const NiahOptions& options, std::ostream& progress);

}  // namespace sb
