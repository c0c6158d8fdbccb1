// RankContext with train.device "cuda": one GPU per rank, so a local rank beyond the
// visible GPUs is refused before any process group is made (NCCL would otherwise fail
// later on a duplicate GPU, with a less helpful message).
#include <gtest/gtest.h>

#ifdef SB_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <stdexcept>
#include <string>

#include "harness/parallel/parallel_layout.h"
#include "harness/parallel/process_group.h"
#include "harness/parallel/rank_context.h"

namespace sb {
namespace {

TEST(RankContextDevice, LocalRankBeyondTheVisibleGpusIsRefused) {
#ifndef SB_WITH_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  const int visible = static_cast<int>(c10::cuda::device_count());
  DistEnv env;
  env.rank = visible;  // one rank more than this machine has GPUs (here: none)
  env.local_rank = visible;
  env.world_size = visible + 1;
  env.local_world_size = visible + 1;
  try {
    RankContext::connect(env, ParallelLayout(visible + 1, 1, 4), /*store=*/{}, "test/", c10::Device(c10::kCUDA),
                         /*tied_embeddings=*/false, std::chrono::milliseconds(1000));
    ADD_FAILURE() << "local rank " << visible << " accepted with " << visible << " GPU(s)";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("local rank " + std::to_string(visible)), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(visible) + " CUDA device(s) are visible"), std::string::npos) << what;
    EXPECT_NE(what.find("CUDA_VISIBLE_DEVICES"), std::string::npos) << what;
  }
#endif
}

}  // namespace
}  // namespace sb
