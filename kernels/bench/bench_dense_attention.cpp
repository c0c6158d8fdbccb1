// Dense causal attention on CPU, forward and forward+backward, on packed batches.
// Args: number of sequences, tokens per sequence, query heads, key/value heads,
// head_dim. tokens/s = packed tokens processed per second of wall time.

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <c10/core/GradMode.h>

#include <vector>

#include "kernels/attention/core/attention_backend.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"

namespace sb {
namespace {

struct AttentionShape {
  int64_t sequences, length, q_heads, kv_heads, head_dim;
  int64_t tokens() const { return sequences * length; }
};

AttentionShape attention_shape_from(const benchmark::State& state) {
  return {state.range(0), state.range(1), state.range(2), state.range(3), state.range(4)};
}

void set_tokens_per_second(benchmark::State& state, int64_t tokens) {
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

void BM_DenseAttentionForward(benchmark::State& state) {
  const AttentionShape s = attention_shape_from(state);
  const auto backend = dense_attention_options().make_backend();
  const auto packed = PackedSequences::from_lengths(std::vector<int64_t>(s.sequences, s.length));
  at::manual_seed(0);
  const at::Tensor q = at::randn({s.tokens(), s.q_heads, s.head_dim});   // [T, Hq, D]
  const at::Tensor k = at::randn({s.tokens(), s.kv_heads, s.head_dim});  // [T, Hkv, D]
  const at::Tensor v = at::randn({s.tokens(), s.kv_heads, s.head_dim});  // [T, Hkv, D]
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  c10::NoGradGuard no_grad;
  for (auto _ : state) {
    at::Tensor out = backend->forward(q, k, v, packed, scale, /*layer=*/0);
    benchmark::DoNotOptimize(out.data_ptr());
  }
  set_tokens_per_second(state, s.tokens());
}

void BM_DenseAttentionForwardBackward(benchmark::State& state) {
  const AttentionShape s = attention_shape_from(state);
  const auto backend = dense_attention_options().make_backend();
  const auto packed = PackedSequences::from_lengths(std::vector<int64_t>(s.sequences, s.length));
  at::manual_seed(0);
  const at::Tensor q = at::randn({s.tokens(), s.q_heads, s.head_dim}).requires_grad_(true);
  const at::Tensor k = at::randn({s.tokens(), s.kv_heads, s.head_dim}).requires_grad_(true);
  const at::Tensor v = at::randn({s.tokens(), s.kv_heads, s.head_dim}).requires_grad_(true);
  const at::Tensor grad_out = at::randn({s.tokens(), s.q_heads, s.head_dim});
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  for (auto _ : state) {
    at::Tensor out = backend->forward(q, k, v, packed, scale, /*layer=*/0);
    out.backward(grad_out);
    benchmark::DoNotOptimize(q.grad().data_ptr());
    q.mutable_grad().reset();
    k.mutable_grad().reset();
    v.mutable_grad().reset();
  }
  set_tokens_per_second(state, s.tokens());
}

// Qwen2.5-0.5B attention geometry (14 query heads over 2 key/value heads, head_dim 64):
// one long sequence, the same tokens split into 4, and a longer single sequence.
void dense_attention_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"seqs", "len", "hq", "hkv", "d"});
  b->Args({1, 512, 14, 2, 64});
  b->Args({4, 128, 14, 2, 64});
  b->Args({1, 2048, 14, 2, 64});
  b->Unit(benchmark::kMillisecond);
  b->UseRealTime();
}

BENCHMARK(BM_DenseAttentionForward)->Apply(dense_attention_shapes);
BENCHMARK(BM_DenseAttentionForwardBackward)->Apply(dense_attention_shapes);

}  // namespace
}  // namespace sb
