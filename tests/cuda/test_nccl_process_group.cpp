// NCCL through c10d from C++ on the GPU: a one-rank process group (the collective
// path, not the transport, is what a single GPU can prove) all-reduces and broadcasts
// a CUDA tensor exactly. Multi-GPU runs are exercised by the distributed runtime.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include "harness/common/system_info.h"
#include "harness/parallel/process_group.h"
#include "tests/support/free_tcp_port.h"

namespace sb {
namespace {

TEST(NcclProcessGroup, OneRankAllReduceAndBroadcastOnTheGpu) {
  DistEnv env;
  env.rank = 0;
  env.world_size = 1;
  env.master_port = test::free_tcp_port();
  auto group = create_process_group(env, CollectiveBackend::kNccl, std::chrono::seconds(60));
  at::Tensor x = at::arange(1, 9, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
  std::vector<at::Tensor> tensors{x.clone()};
  group->allreduce(tensors)->wait();
  EXPECT_TRUE(at::equal(tensors[0].cpu(), x.cpu()));
  group->broadcast(tensors)->wait();
  EXPECT_TRUE(at::equal(tensors[0].cpu(), x.cpu()));
  EXPECT_NE(nccl_version_string(), "none");
}

}  // namespace
}  // namespace sb
