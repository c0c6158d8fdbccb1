#pragma once
// The weights a run starts from, in one place for the trainer and for evaluations that
// compare against them (eval.coverage's "before"): the manifest's model seeded with its
// seed (at::manual_seed, then construction), then model.from's tensors when the run
// fine-tunes a folder. Training options (LoRA, precision) are applied by the caller.

#include <functional>
#include <memory>
#include <string>

#include "harness/config/manifest.h"
#include "models/qwen2/qwen2_model.h"

namespace sb {

// wanted(name) selects the HF tensor names read from model.from (a pipeline stage reads
// only its own; empty: all). A folder that cannot be read is a ConfigError on
// $.model.from.
Qwen2ForCausalLM initial_model(const Manifest& m, std::shared_ptr<AttentionBackend> backend,
                               const std::function<bool(const std::string&)>& wanted = {});

}  // namespace sb
