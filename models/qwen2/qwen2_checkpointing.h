#pragma once
// Per-layer activation checkpointing. LibTorch C++ has no torch.utils.checkpoint, so
// this is a custom autograd node: the forward runs a decoder layer without building a
// graph (only the layer's input is kept), and the backward runs the layer again with
// grad enabled and differentiates that recomputation.
//
// The recomputation repeats the forward exactly: the CPU generator's state (and the
// GPU generator's, for a CUDA input) is restored to what it was before the forward, so
// LoRA dropout draws the same masks, and the thread's autocast settings of the forward
// are re-entered (the backward may run on another thread, outside the forward's
// autocast region). The generators are set back afterwards, so the random stream seen
// by the rest of the program does not depend on whether checkpointing is on.
//
// The attention backend is called again for the layer, with the same layer index; by
// the backend interface a repeated layer replaces its earlier statistics.

#include <ATen/core/Tensor.h>

#include <memory>

#include "kernels/attention/core/attention_backend.h"
#include "kernels/attention/core/packed_sequences.h"
#include "models/qwen2/qwen2_model.h"

namespace sb {

// layer(x, cos, sin, sequences, backend) with x [T, H] -> [T, H], differentiable with
// respect to x and every parameter of the layer that requires grad. Call with grad
// mode enabled (without it there is nothing to checkpoint: call the layer directly).
at::Tensor qwen2_checkpointed_layer_forward(const std::shared_ptr<Qwen2DecoderLayerImpl>& layer,
                                            const at::Tensor& x, const at::Tensor& cos,
                                            const at::Tensor& sin,
                                            const PackedSequences& sequences,
                                            const std::shared_ptr<AttentionBackend>& backend);

}  // namespace sb
