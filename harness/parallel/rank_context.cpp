#include "harness/parallel/rank_context.h"

#include "harness/parallel/error_text.h"

#include <chrono>
#include <stdexcept>

#ifdef SB_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "harness/parallel/clock_sync.h"
#include "harness/parallel/host_staged_backend.h"
#include "harness/parallel/object_exchange.h"

namespace sb {
namespace {

double unix_now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Position of `rank` in `members`, or -1.
int index_in(const std::vector<int64_t>& members, int64_t rank) {
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] == rank) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

RankContext RankContext::single_process(ParallelLayout layout, c10::Device device) {
  if (layout.world_size() != 1) {
    throw std::invalid_argument("RankContext::single_process needs dp = pp = cp = tp = 1");
  }
  RankContext c;
  c.layout = std::move(layout);
  c.device = device;
  c.clock = CommonClock(0.0);
  c.origin_unix_ms = unix_now_ms() - c.clock.now_ms();
  return c;
}

RankContext RankContext::connect(const DistEnv& env, ParallelLayout layout,
                                 const c10::intrusive_ptr<c10d::Store>& store, const std::string& prefix,
                                 c10::Device device, bool tied_embeddings, std::chrono::milliseconds timeout,
                                 CollectiveBackend gpu_backend) {
  if (layout.world_size() != env.world_size) {
    throw std::invalid_argument("the job has " + std::to_string(env.world_size) + " ranks but dp x pp x cp x tp = " +
                                std::to_string(layout.world_size()));
  }
  RankContext c;
  c.layout = std::move(layout);
  c.rank = env.rank;
  c.local_world_size = env.local_world_size;
  c.device = device;
  c.timeout = timeout;
  CollectiveBackend data_backend = CollectiveBackend::kGloo;
  bool stage_through_host = false;
  if (device.is_cuda()) {
#ifdef SB_WITH_CUDA
    const int64_t visible = c10::cuda::device_count();
    int64_t gpu = env.local_rank;
    if (gpu_backend == CollectiveBackend::kGloo) {
      if (visible == 0) throw std::invalid_argument("train.device \"cuda\" but no CUDA device is visible");
      gpu = env.local_rank % visible;  // ranks share the GPUs round-robin
    } else if (env.local_rank >= visible) {
      // One GPU per rank: a second rank on the same GPU would make NCCL fail later with a
      // less helpful message.
      throw std::invalid_argument("rank " + std::to_string(env.rank) + " is local rank " +
                                  std::to_string(env.local_rank) + " of its node but only " +
                                  std::to_string(visible) +
                                  " CUDA device(s) are visible: train.device \"cuda\" uses one GPU per "
                                  "rank with NCCL; launch at most that many ranks per node, set "
                                  "CUDA_VISIBLE_DEVICES, or let ranks share GPUs with train.collectives "
                                  "\"gloo\"");
    }
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(gpu));
    c.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(gpu));
#endif
    data_backend = gpu_backend;
    stage_through_host = gpu_backend == CollectiveBackend::kGloo;
  }
  const auto group = [&](const std::string& name, const std::vector<int64_t>& members,
                         CollectiveBackend backend) -> c10::intrusive_ptr<c10d::Backend> {
    if (members.size() < 2) return {};
    const int index = index_in(members, c.rank);
    if (index < 0) throw std::logic_error("RankContext: rank is not a member of its own group " + name);
    auto made = create_group(store, prefix + name + "/", index, static_cast<int>(members.size()), backend,
                             timeout, env.master_addr);
    if (stage_through_host && backend == CollectiveBackend::kGloo && name != "world") {
      return c10::make_intrusive<HostStagedBackend>(std::move(made));
    }
    return made;
  };
  c.store = store;
  c.store_prefix = prefix;
  std::vector<int64_t> everyone;
  for (int64_t r = 0; r < c.layout.world_size(); ++r) everyone.push_back(r);
  c.world = group("world", everyone, CollectiveBackend::kGloo);
  if (data_backend == CollectiveBackend::kNccl) {
    c.exchange = group("exchange", everyone, CollectiveBackend::kNccl);
    c.exchange_device = c.device;
  } else {
    c.exchange = c.world;  // Gloo, CPU tensors
  }
  const int64_t d = c.dp_rank(), s = c.stage(), cp = c.cp_rank(), tp = c.tp_rank();
  // Group names: one per group of each kind, from the coordinates that tell them apart.
  const auto suffix = [&](int64_t value, int64_t size) { return size > 1 ? "." + std::to_string(value) : std::string(); };
  const std::string pipeline_id = std::to_string(d) + suffix(cp, c.layout.cp()) + suffix(tp, c.layout.tp());
  c.pipeline = group("pipeline" + pipeline_id, c.layout.pipeline_group(d, cp, tp), data_backend);
  c.data_parallel = group("data_parallel" + std::to_string(s) + suffix(tp, c.layout.tp()),
                          c.layout.data_parallel_group(s, tp), data_backend);
  c.context_parallel = group("context_parallel" + std::to_string(d) + "." + std::to_string(s) + suffix(tp, c.layout.tp()),
                             c.layout.context_parallel_group(d, s, tp), data_backend);
  c.tensor_parallel = group("tensor_parallel" + std::to_string(d) + "." + std::to_string(s) + "." + std::to_string(cp),
                            c.layout.tensor_parallel_group(d, s, cp), data_backend);
  if (tied_embeddings && c.layout.pp() > 1 && (c.layout.is_first_stage(c.rank) || c.layout.is_last_stage(c.rank))) {
    c.embedding = group("embedding" + pipeline_id, c.layout.embedding_group(d, cp, tp), data_backend);
  }
  if (c.world) {
    c.clock = CommonClock(estimate_clock_offset_ms(*c.world));
    // Common-clock 0 in Unix time, as rank 0 reads it.
    const double mine = unix_now_ms() - c.clock.now_ms();
    c.origin_unix_ms = all_gather_doubles(*c.world, {mine})[0][0];
  } else {
    c.origin_unix_ms = unix_now_ms() - c.clock.now_ms();
  }
  return c;
}

void RankContext::barrier() const {
  if (!world) return;
  try {
    world->barrier()->wait(timeout);
  } catch (const std::exception& e) {
    throw std::runtime_error(describe() + ": barrier failed: " + error_text(e));
  }
}

void RankContext::wait_for_all(const std::string& name, std::chrono::milliseconds limit) const {
  if (!store) return;
  const std::string base = store_prefix + "wait/" + name + "/";
  store->set(base + std::to_string(rank), std::vector<uint8_t>{1});
  std::vector<std::string> keys;
  for (int64_t r = 0; r < layout.world_size(); ++r) keys.push_back(base + std::to_string(r));
  try {
    store->wait(keys, limit);
  } catch (const std::exception& e) {
    std::string missing;
    for (int64_t r = 0; r < layout.world_size(); ++r) {
      if (!store->check({keys[static_cast<size_t>(r)]})) missing += (missing.empty() ? "" : ", ") + layout.describe_rank(r);
    }
    throw std::runtime_error(describe() + ": " + (missing.empty() ? "some rank" : missing) + " did not reach \"" +
                             name + "\" within " + std::to_string(limit.count() / 1000) + " s: " + error_text(e));
  }
}

}  // namespace sb
