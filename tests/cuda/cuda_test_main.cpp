// GoogleTest main for the CUDA tests: without a CUDA device the binary prints
// SKIPPED and exits 77, which ctest (SKIP_RETURN_CODE 77) reports as skipped rather
// than passed. Listing tests works everywhere so that ctest can discover them.
// `--gpu-ring-rank OUT_DIR` makes the binary one rank of the GPU ring over processes
// (gpu_ring_rank.h), which test_ring_attention_processes_cuda.cpp starts.

#include <ATen/Context.h>
#include <c10/cuda/CUDAFunctions.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "tests/cuda/gpu_ring_rank.h"

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--gpu-ring-rank") == 0) sb::test::run_gpu_ring_rank(argv[2]);
  bool listing = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--gtest_list_tests", std::strlen("--gtest_list_tests")) == 0) {
      listing = true;
    }
  }
  ::testing::InitGoogleTest(&argc, argv);
  if (listing) return RUN_ALL_TESTS();

  // c10's count asks the driver directly; at::hasCUDA() also needs LibTorch's CUDA
  // hooks, so a device seen without them is a broken link, not a reason to skip.
  if (c10::cuda::device_count() == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  if (!at::hasCUDA()) {
    std::fprintf(stderr,
                 "FAILED: a CUDA device is present but LibTorch's CUDA backend is not loaded "
                 "(is libtorch_cuda linked into this binary?)\n");
    return 1;
  }
  return RUN_ALL_TESTS();
}
