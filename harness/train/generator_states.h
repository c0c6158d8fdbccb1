#pragma once
// LibTorch's default random generators of this process, by name: "cpu", and "cuda:<d>"
// for each visible GPU (a CUDA build). A checkpoint keeps them (checkpoint.h), and
// interleaved runs (harness/runner/interleave_schedule.h) each keep their own while
// another run trains, so that a run draws the same numbers whether or not it shares the
// process with others.

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace sb {

using GeneratorStates = std::vector<std::pair<std::string, at::Tensor>>;

GeneratorStates capture_generator_states();

// Sets every generator named in `states`; one it does not name (a GPU the capturing
// process did not see) keeps its state. std::invalid_argument for an unknown name.
void restore_generator_states(const GeneratorStates& states);

}  // namespace sb
