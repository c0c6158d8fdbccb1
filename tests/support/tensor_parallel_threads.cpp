#include "tests/support/tensor_parallel_threads.h"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "harness/parallel/process_group.h"

namespace sb::test {

void run_tp_ranks(int64_t tp, const std::function<void(std::shared_ptr<TensorParallelGroup>)>& body) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  const std::chrono::milliseconds timeout(30000);
  std::vector<std::string> errors(static_cast<size_t>(tp));
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < tp; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(std::make_shared<TensorParallelGroup>(create_group(store, "tp/", static_cast<int>(r), static_cast<int>(tp),
                                                                CollectiveBackend::kGloo, timeout, "127.0.0.1"),
                                                   tp, r, timeout, "tp rank " + std::to_string(r)));
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int64_t r = 0; r < tp; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "tp rank " << r;
}

}  // namespace sb::test
