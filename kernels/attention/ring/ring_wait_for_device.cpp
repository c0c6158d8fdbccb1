#include "kernels/attention/ring/ring_wait_for_device.h"

#ifdef SB_WITH_CUDA
#include "kernels/attention/ring/cuda/ring_step_cuda.h"
#endif

namespace sb {

void ring_wait_for_device(const at::Tensor& like) {
#ifdef SB_WITH_CUDA
  if (like.is_cuda()) ring_step_cuda_synchronize(like);
#else
  (void)like;
#endif
}

}  // namespace sb
