#include "kernels/attention/core/attention_backend.h"

#include <stdexcept>

namespace sb {

void AttentionBackend::set_context_parallel_sharding(std::shared_ptr<const CpSharding> sharding) {
  if (sharding) {
    throw std::logic_error("attention backend \"" + name() +
                           "\" runs on whole micro-batches; context parallelism needs the ring attention backend");
  }
}

}  // namespace sb
