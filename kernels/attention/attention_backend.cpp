#include "kernels/attention/attention_backend.h"

#include <stdexcept>

#include "kernels/attention/dense_causal_attention.h"

namespace sb {

std::vector<std::string> attention_backend_names() { return {"dense"}; }

std::unique_ptr<AttentionBackend> make_attention_backend(const std::string& name) {
  if (name == "dense") return std::make_unique<DenseCausalAttention>();
  std::string known;
  for (const std::string& n : attention_backend_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown attention backend \"" + name +
                              "\"; known backends: " + known);
}

}  // namespace sb
