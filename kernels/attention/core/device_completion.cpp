#include "kernels/attention/core/device_completion.h"

#ifdef SB_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include <utility>

namespace sb {
namespace {

std::function<void()>& host_completion() {
  static std::function<void()> complete;
  return complete;
}

}  // namespace

void wait_for_device_work(const c10::Device& device) {
#ifdef SB_WITH_CUDA
  if (device.is_cuda()) {
    c10::cuda::getCurrentCUDAStream(device.index()).synchronize();
    return;
  }
#endif
  if (device.is_cpu() && host_completion()) host_completion()();
}

void wait_until_usable(const c10::intrusive_ptr<c10d::Work>& work, std::chrono::milliseconds timeout,
                       const c10::Device& device) {
  work->wait(timeout);
  wait_for_device_work(device);
}

void set_host_work_completion(std::function<void()> complete) { host_completion() = std::move(complete); }

}  // namespace sb
