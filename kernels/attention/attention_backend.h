#pragma once
// The attention-backend interface: the Qwen2 model calls one backend per run, chosen
// by name in the manifest. Backends differ in which keys a query attends to (dense
// causal now; MoBA block-sparse and others plug in behind the same call).

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/attention/packed_sequences.h"

namespace sb {

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;
  virtual std::string name() const = 0;
  // q [T, Hq, D]; k, v [T, Hkv, D] with Hq % Hkv == 0 (grouped-query attention:
  // query head h reads key/value head h / (Hq / Hkv)). Returns [T, Hq, D] in q's
  // dtype. Differentiable through autograd with respect to q, k and v.
  virtual at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const PackedSequences& sequences, double scale) = 0;

  // Incremental decoding of ONE sequence with a key/value cache: the n new queries
  // sit at positions [L - n, L) and attend causally to the L keys of the cache (the
  // cache already holds the new tokens' keys). q [n, Hq, D]; k, v [L, Hkv, D] with
  // L >= n. Returns [n, Hq, D]. Used under no-grad for generation.
  virtual at::Tensor forward_cached(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    double scale) = 0;
};

// Known names: "dense". Throws std::invalid_argument naming the known backends.
std::unique_ptr<AttentionBackend> make_attention_backend(const std::string& name);
std::vector<std::string> attention_backend_names();

}  // namespace sb
