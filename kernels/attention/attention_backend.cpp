#include "kernels/attention/attention_backend.h"

#include <stdexcept>

#include "kernels/attention/dense_causal_attention.h"
#include "kernels/attention/moba/moba_attention_backend.h"
#include "kernels/attention/vertical_slash/vertical_slash_backend.h"

namespace sb {

const OptionNames<AttentionKind>& attention_kind_options() {
  static const OptionNames<AttentionKind> names{"attention",
                                                {{"dense", AttentionKind::kDense},
                                                 {"moba", AttentionKind::kMoba},
                                                 {"vertical_slash", AttentionKind::kVerticalSlash}}};
  return names;
}

void AttentionBackend::set_context_parallel_sharding(std::shared_ptr<const CpSharding> sharding) {
  if (sharding) {
    throw std::logic_error("attention backend \"" + name() +
                           "\" runs on whole micro-batches; context parallelism needs the ring attention backend");
  }
}

std::unique_ptr<AttentionBackend> make_attention_backend(const std::string& name) {
  return make_attention_backend(AttentionOptions{attention_kind_options().from_name(name)});
}

std::unique_ptr<AttentionBackend> make_attention_backend(const AttentionOptions& options) {
  switch (options.kind) {
    case AttentionKind::kDense:
      return std::make_unique<DenseCausalAttention>();
    case AttentionKind::kMoba:
      return std::make_unique<MobaAttention>(options.block_size, options.top_k, options.moba_cuda_kernel);
    case AttentionKind::kVerticalSlash:
      return std::make_unique<VerticalSlashAttention>(options.vertical_slash);
  }
  throw std::logic_error("make_attention_backend: an attention kind without a backend");
}

}  // namespace sb
