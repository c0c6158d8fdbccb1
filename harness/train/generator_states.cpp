#include "harness/train/generator_states.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#ifdef SB_WITH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <stdexcept>

namespace sb {
namespace {

at::Generator generator_named(const std::string& name) {
  if (name == "cpu") return at::detail::getDefaultCPUGenerator();
  if (name.rfind("cuda:", 0) == 0) {
#ifdef SB_WITH_CUDA
    const auto device = static_cast<c10::DeviceIndex>(std::stoi(name.substr(5)));
    if (device >= 0 && device < static_cast<c10::DeviceIndex>(c10::cuda::device_count())) {
      return at::cuda::detail::getDefaultCUDAGenerator(device);
    }
#endif
    return {};  // a GPU this process does not see
  }
  throw std::invalid_argument("restore_generator_states: no generator named \"" + name + "\"");
}

}  // namespace

GeneratorStates capture_generator_states() {
  GeneratorStates states;
  states.emplace_back("cpu", at::detail::getDefaultCPUGenerator().get_state());
#ifdef SB_WITH_CUDA
  for (c10::DeviceIndex d = 0; d < static_cast<c10::DeviceIndex>(c10::cuda::device_count()); ++d) {
    states.emplace_back("cuda:" + std::to_string(d), at::cuda::detail::getDefaultCUDAGenerator(d).get_state());
  }
#endif
  return states;
}

void restore_generator_states(const GeneratorStates& states) {
  for (const auto& [name, state] : states) {
    at::Generator generator = generator_named(name);
    if (generator.defined()) generator.set_state(state);
  }
}

}  // namespace sb
