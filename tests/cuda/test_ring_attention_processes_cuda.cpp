// The ring itself between processes on a GPU (docs/context_parallel.md, "On GPUs"): two
// ranks, each a process of this binary on the same GPU (Gloo through host memory, as
// ranks sharing one GPU train), run ring_attention forward and backward through autograd
// for dense, MoBA and vertical-slash under the zigzag and striped layouts (GQA 2:1 at
// head_dim 64; vertical-slash also 7:1 at 128, and under DST's budget and floor). Their outputs, log-sum-exp and q/k/v
// gradients put back together are within the fused kernels' tolerances of the one-rank
// float64 oracle, and vertical-slash's index, built on each rank's GPU with all-reduces,
// is the one-rank rule's (or search's) on both ranks (lists equal, coverage within 1e-10).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/parallel/host_staged_backend.h"
#include "harness/parallel/process_group.h"
#include "models/safetensors/safetensors_file.h"
#include "models/safetensors/safetensors_writer.h"
#include "tests/cuda/gpu_ring_cases.h"
#include "tests/cuda/gpu_ring_rank.h"
#include "tests/support/free_tcp_port.h"
#include "tests/support/run_command.h"
#include "tests/support/worker_processes.h"

namespace sb::test {
namespace {

namespace fs = std::filesystem;

const std::vector<int64_t>& process_ring_lengths() {
  static const std::vector<int64_t> lengths{700, 333, 64, 5};
  return lengths;
}

std::vector<GpuRingCase> gpu_process_ring_cases() {
  std::vector<GpuRingCase> cases;
  for (const auto& [name, layout] : std::vector<std::pair<std::string, CpLayout>>{
           {"zigzag", {CpLayoutKind::kZigzag, 0}}, {"striped64", {CpLayoutKind::kStriped, 64}}}) {
    for (const auto& [pattern_name, pattern] : std::vector<std::pair<std::string, Pattern>>{
             {"_dense", Pattern::kDense}, {"_moba", Pattern::kMoba}, {"_vs", Pattern::kVerticalSlash}}) {
      cases.push_back({name + pattern_name, layout, 2, 0, pattern});
    }
  }
  cases.push_back({"zigzag_vs_gqa7_dim128", {CpLayoutKind::kZigzag, 0}, 2, 0, Pattern::kVerticalSlash, 14, 2, 128});
  // DST's budget and floor on the ring: the search's coverages summed on the GPUs.
  cases.push_back({"striped64_vs_dst", {CpLayoutKind::kStriped, 64}, 2, 0, Pattern::kVerticalSlash, 4, 2, 64,
                   at::kBFloat16, true});
  return cases;
}

double scale_of(const GpuRingCase& c) { return 1.0 / std::sqrt(static_cast<double>(c.dim)); }

fs::path rank_file(const fs::path& dir, const GpuRingCase& c, int64_t rank) {
  return dir / (c.name + "-rank" + std::to_string(rank) + ".safetensors");
}

}  // namespace

void run_gpu_ring_rank(const std::string& out_dir) {
  try {
    const DistEnv env = DistEnv::from_environment();
    const char* timeout_text = std::getenv("SB_DIST_TIMEOUT_MS");
    const std::chrono::milliseconds timeout(timeout_text ? std::atoll(timeout_text) : 120000);
    if (c10::cuda::device_count() == 0) throw std::runtime_error("--gpu-ring-rank needs a CUDA device");
    const auto gpu = static_cast<c10::DeviceIndex>(env.local_rank % c10::cuda::device_count());
    c10::cuda::set_device(gpu);
    const c10::Device device(c10::kCUDA, gpu);
    const auto group = c10::make_intrusive<HostStagedBackend>(create_process_group(env, CollectiveBackend::kGloo, timeout));
    const PackedSequences sequences = PackedSequences::from_lengths(process_ring_lengths());
    for (const GpuRingCase& c : gpu_process_ring_cases()) {
      auto context = std::make_shared<RingContext>(group, env.rank, env.world_size, c.inner, timeout);
      const RingInputs in = gpu_ring_inputs(c, process_ring_lengths());
      const CpSharding sharding = CpSharding::build(sequences, env.world_size, c.layout);
      const auto mine = [&](const at::Tensor& whole) { return sharding.shard(whole, env.rank).contiguous().to(device); };
      at::Tensor q = mine(in.q).requires_grad_(true), k = mine(in.k).requires_grad_(true),
                 v = mine(in.v).requires_grad_(true);
      const std::shared_ptr<RingPatternSelector> selector = gpu_ring_selector(c);
      const RingAttentionResult result =
          ring_attention(q, k, v, sharding, *selector, gpu_ring_request(c), scale_of(c), context);
      result.out.backward(mine(in.grad_out));
      std::vector<std::pair<std::string, at::Tensor>> tensors{{"out", result.out.detach().cpu()},
                                                              {"lse", result.lse.cpu()},
                                                              {"dq", q.grad().cpu()},
                                                              {"dk", k.grad().cpu()},
                                                              {"dv", v.grad().cpu()}};
      if (c.pattern == Pattern::kVerticalSlash) {
        auto [lists, coverage] = ring_index_tensors(ring_last_index(*selector));
        tensors.emplace_back("vs_lists", lists);
        tensors.emplace_back("vs_coverage", coverage);
      }
      write_safetensors(rank_file(out_dir, c, env.rank), tensors);
    }
    std::cout << "rank " << env.rank << " ok\n";
    std::cout.flush();
    std::_Exit(0);  // no teardown handshake with a rank that may already be gone
  } catch (const std::exception& e) {
    std::cerr << "rank failed: " << e.what() << "\n";
    std::cerr.flush();
    std::_Exit(1);
  }
}

namespace {

TEST(RingAttentionCudaProcesses, TwoRanksOnOneGpuEqualTheOneRankOracle) {
  const int world = 2;
  const fs::path dir = fresh_temp_dir("ring_cuda_processes");
  const int port = free_tcp_port();
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::vector<Worker> workers;
  for (int rank = 0; rank < world; ++rank) {
    auto env = rank_env(rank, world, port);
    env["SB_DIST_TIMEOUT_MS"] = "120000";
    workers.push_back(spawn_worker({self, "--gpu-ring-rank", dir.string()}, env, dir / ("rank" + std::to_string(rank) + ".log")));
  }
  // Within ctest's 300 s for the test; every rank is waited for (or killed) before any
  // verdict, so none outlives the test holding the GPU or the port.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(200);
  std::vector<int> codes;
  for (const Worker& worker : workers) codes.push_back(wait_worker(worker, deadline));
  for (int rank = 0; rank < world; ++rank) {
    ASSERT_EQ(codes[rank], 0) << "rank " << rank << ":\n" << slurp(workers[rank].log);
  }
  const PackedSequences sequences = PackedSequences::from_lengths(process_ring_lengths());
  for (const GpuRingCase& c : gpu_process_ring_cases()) {
    SCOPED_TRACE(c.name);
    const double scale = scale_of(c);
    const RingInputs in = gpu_ring_inputs(c, process_ring_lengths());
    const CpSharding sharding = CpSharding::build(sequences, world, c.layout);
    std::vector<SafetensorsFile> files;
    for (int r = 0; r < world; ++r) files.push_back(SafetensorsFile::open(rank_file(dir, c, r)));
    const auto whole = [&](const std::string& name) {
      std::vector<at::Tensor> parts;
      for (const SafetensorsFile& file : files) parts.push_back(file.tensor(name).clone());
      return sharding.unshard(parts);
    };
    const VerticalSlashIndex rule =
        c.pattern == Pattern::kVerticalSlash ? gpu_vertical_slash_rule(in, scale, c) : VerticalSlashIndex{};
    if (c.pattern == Pattern::kVerticalSlash) {  // both ranks built the one-rank rule's index
      const auto [lists, coverage] = ring_index_tensors(rule);
      for (int r = 0; r < world; ++r) {
        EXPECT_TRUE(files[r].tensor("vs_lists").equal(lists)) << "rank " << r;
        EXPECT_LT((files[r].tensor("vs_coverage") - coverage).abs().max().item<double>(), 1e-10) << "rank " << r;
      }
    }
    expect_near_oracle({whole("out"), whole("lse"), whole("dq"), whole("dk"), whole("dv")},
                       gpu_ring_oracle(in, c, scale, rule), c.dtype);
  }
  fs::remove_all(dir);  // kept when a rank failed: its log is there
}

}  // namespace
}  // namespace sb::test
