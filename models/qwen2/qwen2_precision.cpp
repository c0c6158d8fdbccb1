#include "models/qwen2/qwen2_precision.h"

#include <ATen/autocast_mode.h>

#include <stdexcept>

namespace sb {

Qwen2Precision qwen2_precision_from_name(const std::string& name) {
  if (name == "fp32") return Qwen2Precision::kFloat32;
  if (name == "bf16-mixed") return Qwen2Precision::kBFloat16Mixed;
  throw std::invalid_argument("unknown precision \"" + name + "\"; known: fp32, bf16-mixed");
}

std::string qwen2_precision_name(Qwen2Precision precision) {
  switch (precision) {
    case Qwen2Precision::kFloat32:
      return "fp32";
    case Qwen2Precision::kBFloat16Mixed:
      return "bf16-mixed";
  }
  throw std::logic_error("qwen2_precision_name: unhandled precision value");
}

std::vector<std::string> qwen2_precision_names() { return {"fp32", "bf16-mixed"}; }

Qwen2AutocastState Qwen2AutocastState::current() {
  Qwen2AutocastState state;
  state.cpu_enabled = at::autocast::is_autocast_enabled(c10::DeviceType::CPU);
  state.cpu_dtype = at::autocast::get_autocast_dtype(c10::DeviceType::CPU);
  state.cuda_enabled = at::autocast::is_autocast_enabled(c10::DeviceType::CUDA);
  state.cuda_dtype = at::autocast::get_autocast_dtype(c10::DeviceType::CUDA);
  return state;
}

Qwen2AutocastGuard::Qwen2AutocastGuard(c10::DeviceType device_type, Qwen2Precision precision) {
  switch (precision) {
    case Qwen2Precision::kFloat32:
      return;
    case Qwen2Precision::kBFloat16Mixed: {
      Qwen2AutocastState state = Qwen2AutocastState::current();
      if (device_type == c10::DeviceType::CPU) {
        state.cpu_enabled = true;
        state.cpu_dtype = c10::ScalarType::BFloat16;
      } else if (device_type == c10::DeviceType::CUDA) {
        state.cuda_enabled = true;
        state.cuda_dtype = c10::ScalarType::BFloat16;
      } else {
        throw std::invalid_argument(std::string("bf16-mixed precision supports CPU and CUDA, not ") +
                                    c10::DeviceTypeName(device_type));
      }
      apply(state, at::autocast::is_autocast_cache_enabled());
      return;
    }
  }
  throw std::logic_error("Qwen2AutocastGuard: unhandled precision value");
}

Qwen2AutocastGuard::Qwen2AutocastGuard(const Qwen2AutocastState& state) {
  apply(state, /*cache_enabled=*/false);
}

void Qwen2AutocastGuard::apply(const Qwen2AutocastState& state, bool cache_enabled) {
  previous_ = Qwen2AutocastState::current();
  previous_cache_enabled_ = at::autocast::is_autocast_cache_enabled();
  at::autocast::set_autocast_enabled(c10::DeviceType::CPU, state.cpu_enabled);
  at::autocast::set_autocast_dtype(c10::DeviceType::CPU, state.cpu_dtype);
  at::autocast::set_autocast_enabled(c10::DeviceType::CUDA, state.cuda_enabled);
  at::autocast::set_autocast_dtype(c10::DeviceType::CUDA, state.cuda_dtype);
  at::autocast::set_autocast_cache_enabled(cache_enabled);
  at::autocast::increment_nesting();
  active_ = true;
}

Qwen2AutocastGuard::~Qwen2AutocastGuard() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(c10::DeviceType::CPU, previous_.cpu_enabled);
  at::autocast::set_autocast_dtype(c10::DeviceType::CPU, previous_.cpu_dtype);
  at::autocast::set_autocast_enabled(c10::DeviceType::CUDA, previous_.cuda_enabled);
  at::autocast::set_autocast_dtype(c10::DeviceType::CUDA, previous_.cuda_dtype);
  at::autocast::set_autocast_cache_enabled(previous_cache_enabled_);
}

Qwen2AutocastCacheOff::Qwen2AutocastCacheOff()
    : previous_(at::autocast::is_autocast_cache_enabled()) {
  at::autocast::set_autocast_cache_enabled(false);
}

Qwen2AutocastCacheOff::~Qwen2AutocastCacheOff() {
  at::autocast::set_autocast_cache_enabled(previous_);
}

}  // namespace sb
