// Control messages between Gloo ranks (threads of this process over a HashStore):
// gather_strings delivers every member's text to the root only, whatever their lengths;
// sum_over_ranks adds every member's values element-wise on every member.
#include <gtest/gtest.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "harness/parallel/object_exchange.h"
#include "harness/parallel/process_group.h"

namespace sb {
namespace {

// Runs body(group) on `size` ranks of one Gloo group, each on its own thread.
template <typename Body>
void on_ranks(const std::string& prefix, int size, Body body) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto group = create_group(store, prefix, r, size, CollectiveBackend::kGloo, std::chrono::milliseconds(30000),
                                  "127.0.0.1");
        body(*group, r);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

TEST(ObjectExchange, GatherStringsReachesTheRootOnly) {
  const std::vector<std::string> texts{"first rank's report", "", std::string(5000, 'x') + "end"};
  for (int root : {0, 2}) {
    std::vector<std::vector<std::string>> received(3);
    on_ranks("gather" + std::to_string(root) + "/", 3, [&](c10d::Backend& group, int r) {
      received[static_cast<size_t>(r)] = gather_strings(group, texts[static_cast<size_t>(r)], root);
    });
    for (int r = 0; r < 3; ++r) {
      if (r == root) {
        EXPECT_EQ(received[static_cast<size_t>(r)], texts);
      } else {
        EXPECT_TRUE(received[static_cast<size_t>(r)].empty()) << "rank " << r << " is not the root";
      }
    }
  }
}

TEST(ObjectExchange, SumOverRanksAddsElementWiseOnEveryRank) {
  std::vector<std::vector<double>> sums(3);
  on_ranks("sum/", 3, [&](c10d::Backend& group, int r) {
    // Disjoint slots (rank r writes slot r) and one shared slot.
    std::vector<double> mine(4, 0.0);
    mine[static_cast<size_t>(r)] = 0.1 * (r + 1);
    mine[3] = static_cast<double>(r + 1);
    sums[static_cast<size_t>(r)] =
        sum_over_ranks(group, mine, c10::Device(c10::kCPU), std::chrono::milliseconds(30000), "rank " + std::to_string(r));
  });
  for (const auto& sum : sums) EXPECT_EQ(sum, (std::vector<double>{0.1, 0.2, 0.1 * 3, 6.0}));
}

}  // namespace
}  // namespace sb
