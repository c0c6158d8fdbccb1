#pragma once
// A TP rank's profile peers (latency_profiler.h, ProfileTensorParallelPeers) over a c10d
// TP group, made of the trainer's own pieces: the sequence-parallel collectives, the
// head-shard sum, the vocabulary-parallel loss and PipelineStage's TP stage.

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>

#include "harness/latency/latency_profiler.h"

namespace sb {

class TensorParallelGroup;

// vocab_size: the whole model's vocabulary (split as vocab_parallel.h splits it);
// `device`: where the ranks compute (the sums stage their vectors through it, as the
// group's collectives need).
std::shared_ptr<const ProfileTensorParallelPeers> tensor_parallel_profile_peers(
    std::shared_ptr<TensorParallelGroup> group, int64_t vocab_size, c10::Device device);

}  // namespace sb
