#pragma once
// Ranks of a process group (TP ranks, a CP ring) as threads of one test process: real Gloo groups meeting over an
// in-process store, one TP rank per thread.

#include <cstdint>
#include <functional>
#include <memory>

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "harness/parallel/tensor_parallel/tensor_parallel_group.h"

namespace sb::test {

// Runs body(group, rank) on n threads, one member of an n-rank Gloo group each, and
// waits for them; a member's exception becomes a test failure naming it.
void run_group_ranks(int64_t n, const std::function<void(c10::intrusive_ptr<c10d::Backend>, int64_t)>& body);

// Runs body(group) on tp threads, one TP rank each, and waits for them; a rank's
// exception becomes a test failure naming the rank.
void run_tp_ranks(int64_t tp, const std::function<void(std::shared_ptr<TensorParallelGroup>)>& body);

}  // namespace sb::test
