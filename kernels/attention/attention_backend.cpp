#include "kernels/attention/attention_backend.h"

#include <stdexcept>

#include "kernels/attention/dense_causal_attention.h"
#include "kernels/attention/moba/moba_attention_backend.h"

namespace sb {

std::vector<std::string> attention_backend_names() { return {"dense", "moba"}; }

std::unique_ptr<AttentionBackend> make_attention_backend(const std::string& name) {
  return make_attention_backend(AttentionOptions{name});
}

std::unique_ptr<AttentionBackend> make_attention_backend(const AttentionOptions& options) {
  const std::string& name = options.name;
  if (name == "dense") return std::make_unique<DenseCausalAttention>();
  if (name == "moba") return std::make_unique<MobaAttention>(options.block_size, options.top_k);
  std::string known;
  for (const std::string& n : attention_backend_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown attention backend \"" + name +
                              "\"; known backends: " + known);
}

}  // namespace sb
