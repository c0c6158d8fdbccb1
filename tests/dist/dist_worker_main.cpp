// One rank of the c10d tests, started by test_gloo_process_group.cpp with torchrun's
// variables. Usage: sb_dist_worker allreduce|connect|clock  (timeout: SB_DIST_TIMEOUT_MS)
// Exit 0 when every check passed, 1 with a message on stderr otherwise.

#include <ATen/ATen.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "harness/parallel/clock_sync.h"
#include "harness/parallel/process_group.h"

namespace {

int run_allreduce(c10d::Backend& group, const sb::DistEnv& env) {
  // Rank r contributes (r + 1) * [1, 2, ..., 5]; the sum over W ranks is
  // W (W + 1) / 2 * [1, ..., 5], exact in float32 for these sizes.
  std::vector<at::Tensor> tensors{at::arange(1, 6, at::kFloat) * static_cast<float>(env.rank + 1)};
  group.allreduce(tensors)->wait();
  const float factor = env.world_size * (env.world_size + 1) / 2.0f;
  at::Tensor expected = at::arange(1, 6, at::kFloat) * factor;
  if (!at::equal(tensors[0], expected)) {
    std::cerr << "rank " << env.rank << ": allreduce gave " << tensors[0] << " expected "
              << expected << "\n";
    return 1;
  }
  // Broadcast from rank 0 of a value only rank 0 knows.
  std::vector<at::Tensor> value{env.rank == 0 ? at::full({3}, 42.0f) : at::zeros({3})};
  group.broadcast(value)->wait();
  if (!at::equal(value[0], at::full({3}, 42.0f))) {
    std::cerr << "rank " << env.rank << ": broadcast gave " << value[0] << "\n";
    return 1;
  }
  group.barrier()->wait();
  std::cout << "rank " << env.rank << " ok\n";
  return 0;
}

// The barrier-based clock offset on one host, where the true offset is 0.
int run_clock(c10d::Backend& group, const sb::DistEnv& env) {
  const double offset = sb::estimate_clock_offset_ms(group, /*measure_anyway=*/true);
  std::cout << "rank " << env.rank << " offset_ms " << offset << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: sb_dist_worker allreduce|connect|clock\n";
    return 2;
  }
  const std::string scenario = argv[1];
  try {
    const sb::DistEnv env = sb::DistEnv::from_environment();
    const char* timeout_text = std::getenv("SB_DIST_TIMEOUT_MS");
    const std::chrono::milliseconds timeout(timeout_text ? std::atoll(timeout_text) : 30000);
    auto group = sb::create_process_group(env, sb::CollectiveBackend::kGloo, timeout);
    if (scenario == "connect") return 0;
    if (scenario == "allreduce") return run_allreduce(*group, env);
    if (scenario == "clock") return run_clock(*group, env);
    std::cerr << "unknown scenario " << scenario << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "rank failed: " << e.what() << "\n";
    return 1;
  }
}
