#pragma once
// The training loop of one rank (one process, one pipeline stage for now): per
// iteration it draws the global batch, plans micro-batches with the run's batching
// policy, accumulates gradients over the micro-batches with the loss normalised by
// the global batch's predicted-token count, clips, and steps AdamW.

#include <memory>

#include "harness/balance/batching_policy.h"
#include "harness/config/manifest.h"
#include "harness/data/dataset.h"
#include "harness/train/iteration_record.h"
#include "models/qwen2/qwen2_model.h"

namespace torch::optim {
class AdamW;
}

namespace sb {

class Trainer {
 public:
  // run.manifest has exactly one method (see expand_runs). Seeds LibTorch's generator
  // with the manifest seed before building the model, so initial weights reproduce.
  explicit Trainer(const RunSpec& run);
  ~Trainer();

  IterationRecord train_iteration(int64_t iteration);

  Qwen2ForCausalLM& model() { return model_; }

 private:
  RunSpec run_;
  std::unique_ptr<Dataset> dataset_;
  std::unique_ptr<BatchingPolicy> batching_;
  Qwen2ForCausalLM model_{nullptr};
  std::unique_ptr<torch::optim::AdamW> optimizer_;
};

}  // namespace sb
