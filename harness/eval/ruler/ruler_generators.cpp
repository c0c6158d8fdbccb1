#include "harness/eval/ruler/ruler_generators.h"

#include <stdexcept>

namespace sb {

std::vector<RulerRecord> generate_ruler_samples(const RulerTask& task, int64_t max_length, int64_t num_samples,
                                                RulerInputs& inputs) {
  switch (task.family) {
    case RulerFamily::kNiah: return generate_niah(task, max_length, num_samples, inputs);
    case RulerFamily::kVariableTracking: return generate_variable_tracking(task, max_length, num_samples, inputs);
    case RulerFamily::kCommonWords: return generate_common_words(task, max_length, num_samples, inputs);
    case RulerFamily::kFreqWords: return generate_freq_words(task, max_length, num_samples, inputs);
    case RulerFamily::kQa: return generate_qa(task, max_length, num_samples, inputs);
  }
  throw std::logic_error("generate_ruler_samples: unknown family");
}

RulerRecord split_ruler_prompt(RulerFamily family, const std::string& prompt, int64_t index,
                               std::vector<std::string> outputs, int64_t length) {
  const std::string probe = ruler_template(family).answer_prefix.substr(0, 10);  // ASCII: 10 bytes = 10 characters
  const size_t at = prompt.rfind(probe);
  RulerRecord r;
  r.index = index;
  r.input = prompt.substr(0, at);
  r.answer_prefix = prompt.substr(at);
  r.outputs = std::move(outputs);
  r.length = length;
  return r;
}

}  // namespace sb
