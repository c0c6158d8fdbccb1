#include "models/qwen2/qwen2_checkpointing.h"

#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>

#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/qwen2/qwen2_precision.h"

namespace sb {
namespace {

using torch::autograd::variable_list;

at::Tensor generator_state(at::Generator generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_generator_state(at::Generator& generator, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

// States of the default CPU generator and, for a CUDA device, of that GPU's generator.
struct RngStates {
  at::Tensor cpu;
  std::optional<c10::Device> cuda_device;
  at::Tensor cuda;

  static RngStates capture(const c10::Device& device) {
    RngStates states;
    states.cpu = generator_state(at::globalContext().defaultGenerator(c10::Device(c10::kCPU)));
    if (device.is_cuda()) {
      states.cuda_device = device;
      states.cuda = generator_state(at::globalContext().defaultGenerator(device));
    }
    return states;
  }

  void restore() const {
    at::Generator cpu_generator = at::globalContext().defaultGenerator(c10::Device(c10::kCPU));
    set_generator_state(cpu_generator, cpu);
    if (cuda_device) {
      at::Generator cuda_generator = at::globalContext().defaultGenerator(*cuda_device);
      set_generator_state(cuda_generator, cuda);
    }
  }
};

// Backward of one checkpointed layer. Next edges: 0 = the layer input x, 1 + i = the
// layer's parameter i (in layer->parameters() order).
class Qwen2CheckpointedLayerBackward : public torch::autograd::Node {
 public:
  variable_list apply(variable_list&& grads) override {
    TORCH_CHECK(layer_ != nullptr,
                "Qwen2CheckpointedLayerBackward: the layer's saved input was already released; "
                "call backward with retain_graph=true to run backward twice");
    variable_list result(1 + parameters_.size());
    const at::Tensor& grad_output = grads.at(0);  // [T, H]
    if (!grad_output.defined()) return result;

    // Which gradients this graph task needs; asked before the nested backward below.
    std::vector<at::Tensor> wrt;
    std::vector<size_t> slots;
    const bool need_input = task_should_compute_output(0);
    at::Tensor x = saved_input_.unpack().detach();  // [T, H]
    x.set_requires_grad(need_input);
    if (need_input) {
      wrt.push_back(x);
      slots.push_back(0);
    }
    for (size_t i = 0; i < parameters_.size(); ++i) {
      if (task_should_compute_output(1 + i)) {
        wrt.push_back(parameters_[i]);
        slots.push_back(1 + i);
      }
    }
    if (wrt.empty()) return result;

    const RngStates outside = RngStates::capture(x.device());
    rng_.restore();
    at::Tensor y;
    try {
      c10::AutoGradMode grad_mode(true);
      Qwen2AutocastGuard autocast(autocast_);
      y = layer_->forward(x, cos_, sin_, sequences_, *backend_);  // [T, H]
    } catch (...) {
      outside.restore();
      throw;
    }
    outside.restore();

    const variable_list computed =
        torch::autograd::grad({y}, wrt, {grad_output}, /*retain_graph=*/false,
                              /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t k = 0; k < slots.size(); ++k) result[slots[k]] = computed[k];
    return result;
  }

  std::string name() const override { return "Qwen2CheckpointedLayerBackward"; }

  void release_variables() override {
    saved_input_.reset_data();
    layer_.reset();
    backend_.reset();
    parameters_.clear();
    cos_.reset();
    sin_.reset();
  }

  std::shared_ptr<Qwen2DecoderLayerImpl> layer_;
  std::shared_ptr<AttentionBackend> backend_;
  torch::autograd::SavedVariable saved_input_;
  std::vector<at::Tensor> parameters_;
  at::Tensor cos_, sin_;  // [T, D]
  PackedSequences sequences_;
  RngStates rng_;
  Qwen2AutocastState autocast_;
};

}  // namespace

at::Tensor qwen2_checkpointed_layer_forward(const std::shared_ptr<Qwen2DecoderLayerImpl>& layer,
                                            const at::Tensor& x, const at::Tensor& cos,
                                            const at::Tensor& sin,
                                            const PackedSequences& sequences,
                                            const std::shared_ptr<AttentionBackend>& backend) {
  TORCH_CHECK(layer != nullptr && backend != nullptr,
              "qwen2_checkpointed_layer_forward: layer and backend must not be null");
  std::vector<at::Tensor> parameters = layer->parameters();
  variable_list inputs{x};
  inputs.insert(inputs.end(), parameters.begin(), parameters.end());

  RngStates rng = RngStates::capture(x.device());
  const Qwen2AutocastState autocast = Qwen2AutocastState::current();
  at::Tensor y;
  {
    c10::NoGradGuard no_grad;
    Qwen2AutocastCacheOff cache_off;
    y = layer->forward(x, cos, sin, sequences, *backend);  // [T, H]
  }
  if (!torch::autograd::compute_requires_grad(inputs)) return y;

  auto node = std::shared_ptr<Qwen2CheckpointedLayerBackward>(new Qwen2CheckpointedLayerBackward(),
                                                              torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(inputs));
  node->layer_ = layer;
  node->backend_ = backend;
  node->saved_input_ = torch::autograd::SavedVariable(x, /*is_output=*/false);
  node->parameters_ = std::move(parameters);
  node->cos_ = cos;
  node->sin_ = sin;
  node->sequences_ = sequences;
  node->rng_ = std::move(rng);
  node->autocast_ = autocast;
  torch::autograd::set_history(y, node);
  return y;
}

}  // namespace sb
