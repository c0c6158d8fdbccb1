#include "harness/train/memory_estimate.h"

#ifdef SB_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <cstdio>
#include <set>
#include <stdexcept>

#include "common/errors.h"
#include "harness/parallel/parallel_layout.h"
#include "models/qwen2/qwen2_head_loss.h"

namespace sb {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// glibc's malloc keeps freed blocks below its mmap threshold (up to 32 MiB) for reuse, so
// a CPU rank's resident set stays above its live tensors: 26-39 % of the activations in
// the runs of docs/memory.md (default allocator against MALLOC_MMAP_THRESHOLD_=131072).
constexpr double kCpuAllocatorShare = 0.25;

// The shapes one rank of a stage works with.
struct Shapes {
  double h, q, kv, inter, heads, vocab, head_dim;  // hidden, query width, key/value width, MLP width, query heads
  double tp;
  double tokens;  // t: this CP rank's tokens of the micro-batch
  double rows;    // L: its rows of the residual stream (t / tp under sequence parallelism)
};

// Parameters of one decoder layer on one TP rank: {all, matmul weights}.
std::pair<double, double> layer_parameters(const Shapes& s) {
  const double matmul = (s.h * s.q + 2 * s.h * s.kv + s.q * s.h + 3 * s.h * s.inter) / s.tp;
  const double biases = (s.q + 2 * s.kv) / s.tp;
  return {matmul + biases + 2 * s.h, matmul};
}

// LoRA's adapters of one layer on one TP rank (docs/tensor_parallel.md: A whole on
// column-parallel projections, B whole on row-parallel ones), and the inputs its dropout
// copies, per token.
struct LoraLayer {
  double parameters = 0;
  double dropout_inputs = 0;
};
LoraLayer lora_layer(const Shapes& s, const LoraSection& lora) {
  const std::set<std::string> targets(lora.target_modules.begin(), lora.target_modules.end());
  const double r = static_cast<double>(lora.rank);
  LoraLayer out;
  const auto column = [&](const char* name, double in, double width) {
    if (!targets.count(name)) return;
    out.parameters += r * in + width / s.tp * r;
    out.dropout_inputs += in;
  };
  const auto row = [&](const char* name, double in, double width) {
    if (!targets.count(name)) return;
    out.parameters += r * in / s.tp + width * r;
    out.dropout_inputs += in / s.tp;
  };
  column("q_proj", s.h, s.q);
  column("k_proj", s.h, s.kv);
  column("v_proj", s.h, s.kv);
  row("o_proj", s.q, s.h);
  column("gate_proj", s.h, s.inter);
  column("up_proj", s.h, s.inter);
  row("down_proj", s.inter, s.h);
  return out;
}

// Bytes autograd keeps of one layer for one micro-batch (docs/memory.md, "Activations"):
// the residual-stream tensors [L, H] float32 (the layer's input, each norm's normalised
// rows, the attention's sum), each projection's saved input [t, H] (float32, or its
// bfloat16 cast under autocast), the attention's q and k after rotation, v, the output
// and its contiguous copy [t, width / tp] and the float32 log-sum-exp, and the MLP's
// gate, SiLU, up and product [t, I / tp].
double layer_activation_bytes(const Shapes& s, bool bf16) {
  const double act = bf16 ? 2 : 4;
  const double stream = 4 * s.h * s.rows * 4;        // x, normalised (twice), h
  const double projection_inputs = 2 * act * s.h * s.tokens;
  const double attention = act * s.tokens * (3 * s.q + 2 * s.kv) / s.tp + 4 * s.tokens * s.heads / s.tp;
  const double mlp = 4 * act * s.tokens * s.inter / s.tp;
  return stream + projection_inputs + attention + mlp;
}

}  // namespace

double StageMemoryEstimate::total() const {
  return weights + weight_casts + gradients + optimizer + activations + loss + backward + communication + allocator +
         runtime;
}

const StageMemoryEstimate& MemoryEstimate::largest() const {
  if (stages.empty()) throw std::logic_error("MemoryEstimate::largest: no stages");
  return *std::max_element(stages.begin(), stages.end(),
                           [](const auto& a, const auto& b) { return a.total() < b.total(); });
}

MemoryEstimate estimate_rank_memory(const Manifest& m, MemoryTarget target, double runtime_bytes) {
  const bool host = target == MemoryTarget::kHostProcess;
  const Qwen2Config& c = m.model.config;
  const ParallelLayout layout = parallel_layout_of(m);
  const bool bf16 = m.train.precision == Qwen2Precision::kBFloat16Mixed;
  const double act = bf16 ? 2 : 4;
  MemoryEstimate estimate;
  estimate.tokens = m.train.max_tokens_per_microbatch;
  estimate.rank_tokens = (estimate.tokens + layout.cp() - 1) / layout.cp();
  Shapes s{};
  s.h = static_cast<double>(c.hidden_size);
  s.q = static_cast<double>(c.num_attention_heads * c.head_dim);
  s.kv = static_cast<double>(c.num_key_value_heads * c.head_dim);
  s.inter = static_cast<double>(c.intermediate_size);
  s.heads = static_cast<double>(c.num_attention_heads);
  s.vocab = static_cast<double>(c.vocab_size);
  s.head_dim = static_cast<double>(c.head_dim);
  s.tp = static_cast<double>(layout.tp());
  s.tokens = static_cast<double>(estimate.rank_tokens);
  s.rows = s.tokens / s.tp;
  const auto [layer_params, layer_matmul] = layer_parameters(s);
  const LoraLayer lora = m.train.lora ? lora_layer(s, *m.train.lora) : LoraLayer{};
  const double per_layer = layer_activation_bytes(s, bf16) +
                           (m.train.lora && m.train.lora->dropout > 0 ? lora.dropout_inputs * s.tokens * (act + 1) : 0);
  const double vocab_rows = s.vocab / s.tp;  // of the embedding or head on this TP rank
  // 1F1B holds p - s micro-batches on stage s, or all of a DP rank's when it has fewer
  // (at most one sample each).
  const int64_t per_dp_rank = (m.train.global_batch_size + layout.dp() - 1) / layout.dp();

  for (int64_t stage = 0; stage < layout.pp(); ++stage) {
    StageMemoryEstimate e;
    e.stage = stage;
    e.layers = layout.layers_of_stage(stage).count();
    e.microbatches_in_flight = std::max<int64_t>(1, std::min(layout.pp() - stage, per_dp_rank));
    const bool first = stage == 0, last = stage == layout.pp() - 1;
    const double layers = static_cast<double>(e.layers);
    double params = layers * layer_params;
    if (first) params += vocab_rows * s.h;  // the embedding
    // The head: its own matrix, or on a last stage apart from the first, the tied copy.
    const bool head_matrix = last && (!c.tie_word_embeddings || !first);
    if (last) params += s.h + (head_matrix ? vocab_rows * s.h : 0);
    const double adapters = layers * lora.parameters;  // 0 without LoRA
    const double trained = m.train.lora ? adapters : params;
    e.weights = 4 * (params + adapters);
    const double in_flight = static_cast<double>(e.microbatches_in_flight);
    // Autocast's bfloat16 weight copies: autograd keeps each micro-batch's until its
    // backward; checkpointed layers keep none, but one forward's cache holds all of them.
    if (bf16) {
      e.weight_casts = 2 * layers * layer_matmul * (m.train.activation_checkpointing ? 1.0 : in_flight) +
                       (last ? 2 * vocab_rows * s.h : 0);  // the head's, for the loss's matmuls
    }
    e.gradients = 4 * trained;
    e.optimizer = 8 * trained;
    e.activations_per_layer = per_layer;
    const double rope_tables = 2 * 4 * s.tokens * s.head_dim;
    if (m.train.activation_checkpointing) {
      e.activations = in_flight * (layers * 4 * s.h * s.rows + rope_tables) + per_layer;
    } else {
      e.activations = in_flight * (layers * per_layer + rope_tables);
    }
    if (last) {
      // The final norm's input, normalised rows and output (the loss keeps the output).
      e.activations += in_flight * 3 * 4 * s.h * s.tokens;
      const double chunk_rows = std::min(static_cast<double>(head_loss_chunk_rows(static_cast<int64_t>(vocab_rows))), s.tokens);
      const bool head_trained = !m.train.lora;
      e.loss = 2 * 4 * chunk_rows * vocab_rows + (head_trained ? 4 * vocab_rows * s.h : 0);
    }
    // One layer's backward: the MLP's gradients [t, I / tp] three at a time, two [t, H]
    // float32, and a fresh weight gradient before it is added into its bucket.
    e.backward = 3 * act * s.tokens * s.inter / s.tp + 2 * 4 * s.h * s.tokens +
                 (m.train.lora ? 0 : 4 * s.h * s.inter / s.tp);
    if (layout.pp() > 1) e.communication = 4 * s.h * s.rows;  // a received activation gradient
    if (host) e.allocator = kCpuAllocatorShare * e.activations;
    e.runtime = host ? runtime_bytes : 0.0;
    estimate.stages.push_back(e);
  }
  return estimate;
}

std::string describe_memory_estimate(const MemoryEstimate& estimate, const std::string& device_label) {
  const auto gib = [](double bytes) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.2f", bytes / kGiB);
    return std::string(text);
  };
  const auto line = [&](const StageMemoryEstimate& e) {
    return gib(e.total()) + " GiB: weights " + gib(e.weights + e.weight_casts) + ", gradients " + gib(e.gradients) +
           ", optimizer " + gib(e.optimizer) + ", activations " + gib(e.activations) + " (" +
           std::to_string(e.microbatches_in_flight) + " micro-batch" + (e.microbatches_in_flight > 1 ? "es" : "") +
           " in flight), loss " + gib(e.loss) + ", backward " + gib(e.backward) +
           (e.communication > 0 ? ", communication " + gib(e.communication) : "") +
           (e.allocator > 0 ? ", allocator " + gib(e.allocator) : "") +
           (e.runtime > 0 ? ", runtime " + gib(e.runtime) : "");
  };
  std::string text = "memory per rank (estimate, " + std::to_string(estimate.tokens) + "-token micro-batch, " +
                     device_label + "): ";
  if (estimate.stages.size() == 1) return text + line(estimate.stages.front()) + "\n";
  text += "largest on stage " + std::to_string(estimate.largest().stage) + "\n";
  for (const StageMemoryEstimate& e : estimate.stages) text += "  stage " + std::to_string(e.stage) + ": " + line(e) + "\n";
  return text;
}

void check_memory_fits_device(const Manifest& manifest, int64_t stage, const c10::Device& device,
                              int64_t local_ranks) {
#ifdef SB_WITH_CUDA
  if (!device.is_cuda()) return;
  const int64_t gpus = std::max<int64_t>(1, static_cast<int64_t>(c10::cuda::device_count()));
  const int64_t ranks_on_device = manifest.train.gpus_shared() ? (std::max<int64_t>(1, local_ranks) + gpus - 1) / gpus : 1;
  const c10::cuda::CUDAGuard guard(device);
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return;  // no figure to refuse with
  const MemoryEstimate estimate = estimate_rank_memory(manifest, MemoryTarget::kDevice);
  const double need = ranks_on_device > 1 ? static_cast<double>(ranks_on_device) * estimate.largest().total()
                                          : estimate.stages.at(static_cast<size_t>(stage)).total();
  if (need <= static_cast<double>(free)) return;
  char figures[200];
  std::snprintf(figures, sizeof(figures), "%.1f GiB for the %lld rank(s) on GPU %d (stage %lld), which has %.1f GiB free of %.1f GiB",
                need / kGiB, static_cast<long long>(ranks_on_device), static_cast<int>(device.index()),
                static_cast<long long>(stage), static_cast<double>(free) / kGiB, static_cast<double>(total) / kGiB);
  std::string detail = describe_memory_estimate(estimate, "cuda");
  while (!detail.empty() && detail.back() == '\n') detail.pop_back();
  throw ConfigError(manifest.file, "$.train.max_tokens_per_microbatch",
                    "the estimated memory of a " + std::to_string(estimate.tokens) + "-token micro-batch is " + figures +
                        " (" + detail + ")",
                    "lower train.max_tokens_per_microbatch, set train.activation_checkpointing true, or split the "
                    "work further with parallelism.tp, .cp or .pp (docs/memory.md)");
#else
  (void)manifest;
  (void)stage;
  (void)device;
  (void)local_ranks;
#endif
}

}  // namespace sb
