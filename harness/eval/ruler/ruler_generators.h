#pragma once
// RULER's sample generators, one per family (ruler_niah.cpp, ruler_variable_tracking.cpp,
// ruler_common_words.cpp, ruler_freq_words.cpp, ruler_qa.cpp), each as RULER's script of
// that name draws its samples: one process per (task, length) seeded with inputs.seed,
// a size search, then num_samples samples of at most max_length tokens (prompt, answer
// prefix and generation budget). docs/ruler.md.

#include <vector>

#include "harness/eval/ruler/ruler_inputs.h"
#include "harness/eval/ruler/ruler_tasks.h"

namespace sb {

std::vector<RulerRecord> generate_ruler_samples(const RulerTask& task, int64_t max_length, int64_t num_samples,
                                                RulerInputs& inputs);

std::vector<RulerRecord> generate_niah(const RulerTask& task, int64_t max_length, int64_t num_samples, RulerInputs& inputs);
std::vector<RulerRecord> generate_variable_tracking(const RulerTask& task, int64_t max_length, int64_t num_samples,
                                                    RulerInputs& inputs);
std::vector<RulerRecord> generate_common_words(const RulerTask& task, int64_t max_length, int64_t num_samples,
                                               RulerInputs& inputs);
std::vector<RulerRecord> generate_freq_words(const RulerTask& task, int64_t max_length, int64_t num_samples,
                                             RulerInputs& inputs);
std::vector<RulerRecord> generate_qa(const RulerTask& task, int64_t max_length, int64_t num_samples, RulerInputs& inputs);

// The record of a full prompt: cut at the last occurrence of the family's answer prefix's
// first 10 characters (input before it, answer_prefix from it), as every generator does.
RulerRecord split_ruler_prompt(RulerFamily family, const std::string& prompt, int64_t index,
                               std::vector<std::string> outputs, int64_t length);

}  // namespace sb
