// HostStagedBackend with the tensors on a GPU: two ranks (threads) on the same GPU talk
// Gloo through pinned host buffers, as ranks sharing a GPU do (train.collectives
// "gloo"); the same checks as the CPU test.
#include <gtest/gtest.h>

#include <c10/cuda/CUDAFunctions.h>

#include "tests/support/host_staged_collective_checks.h"

namespace sb {
namespace {

TEST(HostStagedBackendCuda, EveryCallLeavesItsResultInTheCallersGpuTensors) {
  if (c10::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  testing::check_host_staged_collectives(c10::Device(c10::kCUDA, 0));
}

}  // namespace
}  // namespace sb
