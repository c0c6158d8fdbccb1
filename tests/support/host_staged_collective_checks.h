#pragma once
// HostStagedBackend against what each call must produce, on tensors of one device (the
// CPU test and the CUDA test run the same checks): two ranks are threads of this
// process, Gloo between them over an in-process store, each wrapped in the staging
// backend. The tensors are non-contiguous views where a caller may pass one, so the
// copies back into the caller's tensors are checked, not only the host traffic.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "harness/parallel/host_staged_backend.h"
#include "harness/parallel/process_group.h"

namespace sb::testing {

// Rank r's values: distinct per rank and per element, exact in float32.
inline at::Tensor rank_values(int64_t rank, at::IntArrayRef shape, c10::Device device) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return (at::arange(n, at::kFloat) + 1000.0 * static_cast<double>(rank + 1)).view(shape).to(device);
}

inline void expect_equal(const at::Tensor& actual, const at::Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  EXPECT_TRUE(at::equal(actual.cpu(), expected.cpu())) << what << ": " << actual.cpu() << " vs " << expected.cpu();
}

inline void check_host_staged_collectives(c10::Device device) {
  constexpr int kRanks = 2;
  auto store = c10::make_intrusive<c10d::HashStore>();
  const std::chrono::milliseconds timeout(30000);
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      try {
        HostStagedBackend group(
            create_group(store, "staged/", r, kRanks, CollectiveBackend::kGloo, timeout, "127.0.0.1"));
        const int peer = 1 - r;
        // all-reduce into two columns of a transposed view (strided, not contiguous): the
        // sum of both ranks' values
        at::Tensor matrix = rank_values(r, {3, 4}, device).t();  // [4, 3] view
        std::vector<at::Tensor> tensors{matrix.narrow(1, 1, 2)};
        EXPECT_FALSE(tensors[0].is_contiguous());
        const at::Tensor untouched = matrix.narrow(1, 0, 1).clone();
        c10d::AllreduceOptions sum;
        sum.reduceOp = c10d::ReduceOp::SUM;
        group.allreduce(tensors, sum)->wait(timeout);
        expect_equal(matrix.narrow(1, 1, 2),
                     (rank_values(0, {3, 4}, device) + rank_values(1, {3, 4}, device)).t().narrow(1, 1, 2),
                     "all-reduce rank " + std::to_string(r));
        expect_equal(matrix.narrow(1, 0, 1), untouched, "the columns beside the all-reduced view");
        // broadcast from rank 1
        std::vector<at::Tensor> broadcast{rank_values(r, {5}, device)};
        c10d::BroadcastOptions from_one;
        from_one.rootRank = 1;
        group.broadcast(broadcast, from_one)->wait(timeout);
        expect_equal(broadcast[0], rank_values(1, {5}, device), "broadcast rank " + std::to_string(r));
        // all-gather: rank q's tensor in slot q
        std::vector<at::Tensor> input{rank_values(r, {2, 3}, device)};
        std::vector<std::vector<at::Tensor>> gathered(1);
        for (int q = 0; q < kRanks; ++q) gathered[0].push_back(at::zeros({2, 3}, input[0].options()));
        group.allgather(gathered, input)->wait(timeout);
        for (int q = 0; q < kRanks; ++q) {
          expect_equal(gathered[0][static_cast<size_t>(q)], rank_values(q, {2, 3}, device),
                       "all-gather slot " + std::to_string(q) + " on rank " + std::to_string(r));
        }
        // reduce-scatter: rank q keeps the sum of every rank's slot q
        std::vector<std::vector<at::Tensor>> slots(1);
        for (int q = 0; q < kRanks; ++q) slots[0].push_back(rank_values(r, {4}, device) * (q + 1));
        std::vector<at::Tensor> mine{at::zeros({4}, slots[0][0].options())};
        c10d::ReduceScatterOptions scatter_sum;
        scatter_sum.reduceOp = c10d::ReduceOp::SUM;
        group.reduce_scatter(mine, slots, scatter_sum)->wait(timeout);
        expect_equal(mine[0], (rank_values(0, {4}, device) + rank_values(1, {4}, device)) * (r + 1),
                     "reduce-scatter rank " + std::to_string(r));
        // send and receive at once (a pipeline exchange): each rank gets its peer's values,
        // received into two columns of a larger tensor (strided)
        std::vector<at::Tensor> outgoing{rank_values(r, {3, 2}, device)};
        at::Tensor landing = at::zeros({3, 4}, outgoing[0].options());
        std::vector<at::Tensor> incoming{landing.narrow(1, 1, 2)};
        EXPECT_FALSE(incoming[0].is_contiguous());
        auto sent = group.send(outgoing, peer, /*tag=*/7);
        auto received = group.recv(incoming, peer, /*tag=*/7);
        EXPECT_FALSE(received->isCompleted()) << "complete before its results were copied back";
        received->wait(timeout);
        sent->wait(timeout);
        expect_equal(landing.narrow(1, 1, 2), rank_values(peer, {3, 2}, device),
                     "received values on rank " + std::to_string(r));
        expect_equal(landing.narrow(1, 0, 1), at::zeros({3, 1}, landing.options()), "the column beside them");
        expect_equal(landing.narrow(1, 3, 1), at::zeros({3, 1}, landing.options()), "the column after them");
        EXPECT_TRUE(received->isCompleted());
        group.barrier(c10d::BarrierOptions())->wait(timeout);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

}  // namespace sb::testing
