#pragma once
// When the host may take device work, and a collective's result, as done.
//
// A GPU runs kernels asynchronously on a stream, and NCCL's Work::wait() makes the
// caller's current stream wait for the collective; whether it also blocks the host
// depends on the PyTorch version and the timeout passed, and the stream may still be
// running earlier work. A host clock read after a launch or a wait() may measure
// launches, not work, and a slow peer's message then lands inside the next compute
// interval. The two calls below make every timed interval mean one thing on
// every backend (docs/metrics.md, "What each interval holds"):
//   wait_for_device_work  ends a compute interval when its work has finished;
//   wait_until_usable     ends a wait when the data has arrived, for the host and the
//                         compute stream alike, so waiting is measured as wait.
// On the CPU, ops are synchronous and Gloo's wait() blocks: the first is a no-op, the
// second is Work::wait().
//
// Tests stand in for a device stream on the CPU: set_host_work_completion installs what
// completes the host's queued work (tests/support/deferred_completion_backend.h defers a
// collective's completion to it, as NCCL defers it to the stream).

#include <torch/csrc/distributed/c10d/Work.hpp>
#include <c10/core/Device.h>

#include <chrono>
#include <functional>

namespace sb {

// Blocks the host until the work queued on `device`'s current stream has finished.
void wait_for_device_work(const c10::Device& device);

// Work::wait(timeout) (which throws on failure or timeout), then wait_for_device_work:
// on return the collective's results are in their tensors.
void wait_until_usable(const c10::intrusive_ptr<c10d::Work>& work, std::chrono::milliseconds timeout,
                       const c10::Device& device);

// What wait_for_device_work does for a CPU device (default: nothing). Process-wide; for
// tests only. An empty function restores the default.
void set_host_work_completion(std::function<void()> complete);

}  // namespace sb
