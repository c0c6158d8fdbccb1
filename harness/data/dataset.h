#pragma once
// The dataset interface the training loop reads: samples addressed by a global sample id,
// each a pure function of the data, the seed and the id, so that every rank can build any
// sample without coordination, a rerun sees the same data, and a resumed run continues
// from the same place (its cursor is simply the iteration).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/data/batch_shape.h"
#include "harness/data/data_spec.h"
#include "harness/data/sample.h"

namespace sb {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual Sample sample(int64_t id) const = 0;
  // sample(id)'s length and trained tokens; datasets override it to skip drawing the ids.
  virtual SampleShape shape(int64_t id) const;
  // The longest sample this dataset can produce (checked against the micro-batch
  // capacity before training starts).
  virtual int64_t max_length() const = 0;
  // One line for logs and the run's context: source, task, size.
  virtual std::string describe() const = 0;

  // The samples of one optimizer step: ids iteration * size ... + size - 1.
  std::vector<Sample> global_batch(int64_t iteration, int64_t global_batch_size) const;
  // The same batch's shape (what the planner reads), without token ids.
  BatchShape global_batch_shape(int64_t iteration, int64_t global_batch_size) const;
  // The sample at `position` (0-based) of that batch.
  Sample batch_sample(int64_t iteration, int64_t global_batch_size, int64_t position) const {
    return sample(iteration * global_batch_size + position);
  }
};

// What the model and the run allow a sample to be.
struct DatasetLimits {
  int64_t vocab_size = 0;     // token ids must stay below it
  int64_t max_tokens = 0;     // the micro-batch capacity
  int64_t max_positions = 0;  // the model's positions (YaRN's extended range included)
};

// JSONL conversations beyond a limit follow data.jsonl.too_long. Errors in the data are
// ConfigErrors naming the file (and line).
std::unique_ptr<Dataset> make_dataset(const DataSection& data, int64_t seed, const DatasetLimits& limits);

}  // namespace sb
