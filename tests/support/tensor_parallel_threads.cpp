#include "tests/support/tensor_parallel_threads.h"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "harness/parallel/process_group.h"

namespace sb::test {

void run_group_ranks(int64_t n, const std::function<void(c10::intrusive_ptr<c10d::Backend>, int64_t)>& body) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  const std::chrono::milliseconds timeout(30000);
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(create_group(store, "group/", static_cast<int>(r), static_cast<int>(n), CollectiveBackend::kGloo, timeout,
                          "127.0.0.1"),
             r);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int64_t r = 0; r < n; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

void run_tp_ranks(int64_t tp, const std::function<void(std::shared_ptr<TensorParallelGroup>)>& body) {
  run_group_ranks(tp, [&](c10::intrusive_ptr<c10d::Backend> group, int64_t r) {
    body(std::make_shared<TensorParallelGroup>(std::move(group), tp, r, std::chrono::milliseconds(30000),
                                               "tp rank " + std::to_string(r)));
  });
}

}  // namespace sb::test
