#pragma once
// A ring's clocks (step events, the index's compute and wait) time device work, not its
// launches: on a GPU the host waits for the work queued on `like`'s device before it
// reads the clock. Nothing to wait for on the CPU, or in a build without CUDA.

#include <ATen/core/Tensor.h>

namespace sb {

void ring_wait_for_device(const at::Tensor& like);

}  // namespace sb
