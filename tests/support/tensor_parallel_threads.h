#pragma once
// Tensor-parallel ranks as threads of one test process: real Gloo groups meeting over an
// in-process store, one TP rank per thread.

#include <cstdint>
#include <functional>
#include <memory>

#include "harness/parallel/tensor_parallel/tensor_parallel_group.h"

namespace sb::test {

// Runs body(group) on tp threads, one TP rank each, and waits for them; a rank's
// exception becomes a test failure naming the rank.
void run_tp_ranks(int64_t tp, const std::function<void(std::shared_ptr<TensorParallelGroup>)>& body);

}  // namespace sb::test
