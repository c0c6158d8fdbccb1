// HostStagedBackend on CPU tensors: the staging copies and the copies back run as on a
// GPU (into fresh host buffers), so what each call leaves in the caller's tensors is
// checked here; tests/cuda/test_host_staged_backend_cuda.cpp runs the same checks on a
// GPU. A receive whose peer never sends fails within the timeout, naming no hang.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <chrono>
#include <thread>

#include "tests/support/host_staged_collective_checks.h"

namespace sb {
namespace {

TEST(HostStagedBackend, EveryCallLeavesItsResultInTheCallersTensors) {
  testing::check_host_staged_collectives(c10::Device(c10::kCPU));
}

TEST(HostStagedBackend, AReceiveWithoutASenderFailsWithinTheTimeout) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  const std::chrono::milliseconds timeout(20000), short_wait(1500);
  std::string error;
  std::thread silent([&] {  // joins the group, never sends
    try {
      auto group = create_group(store, "silent/", 1, 2, CollectiveBackend::kGloo, timeout, "127.0.0.1");
      std::this_thread::sleep_for(2 * short_wait);
    } catch (const std::exception&) {
    }
  });
  try {
    HostStagedBackend group(create_group(store, "silent/", 0, 2, CollectiveBackend::kGloo, timeout, "127.0.0.1"));
    std::vector<at::Tensor> incoming{at::zeros({4})};
    const auto start = std::chrono::steady_clock::now();
    try {
      group.recv(incoming, 1, 3)->wait(short_wait);
      ADD_FAILURE() << "a receive without a sender returned";
    } catch (const std::exception& e) {
      error = e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2 * short_wait);
    EXPECT_TRUE(at::equal(incoming[0], at::zeros({4}))) << "a failed receive wrote into the caller's tensor";
  } catch (const std::exception& e) {
    ADD_FAILURE() << "setting up the group failed: " << e.what();
  }
  silent.join();
  EXPECT_NE(error.find("imed out"), std::string::npos) << error;
}

}  // namespace
}  // namespace sb
