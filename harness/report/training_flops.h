#pragma once
// Throughput in FLOPs (docs/metrics.md, "Throughput"): the model FLOPs of a training
// iteration and the peak of the GPU it ran on, for achieved TFLOP/s and MFU.
//
// Model FLOPs ([our rule], PaLM's MFU convention with causal attention): forward and
// backward are 3x the forward's matmul FLOPs; activation recomputation is not counted;
// the attention is dense-equivalent, every causal (query, key) pair of each sequence
// (L (L + 1) / 2 per sequence and query head), so a sparse run's figure is what dense
// attention would have had to compute: its effective throughput. Per token and layer the
// forward is 2 x the layer's projection weights; per pair and query head 4 x head_dim
// (scores and the weighted sum); per token 2 x hidden x vocabulary for the head.
// Norms, rotary, softmax and elementwise work are left out (under 1 % at these shapes).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/qwen2/qwen2_config.h"

namespace sb {

// The model FLOPs of training on sequences of these lengths (forward and backward).
double training_model_flops(const Qwen2Config& config, const std::vector<int64_t>& sequence_lengths);

// Dense bf16 peak TFLOP/s (no structured sparsity) of a GPU named as the CUDA driver
// names it ("NVIDIA H100 80GB HBM3"), from the vendors' data sheets: A100 312, H100 SXM
// 989 and PCIe 756, H200 989, H20 148, B200 2250. nullopt for other devices.
std::optional<double> known_gpu_peak_tflops(const std::string& gpu_name);

}  // namespace sb
