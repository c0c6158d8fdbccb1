#pragma once
// What planning and the iteration record need of a global batch: each sample's length
// (in batch order) and the batch's token, loss-token and sequence counts. The trainer
// and the simulator both take it from Dataset::global_batch_shape, which draws no token
// ids: at 16,384 sequences of 32K-128K tokens the ids would be gigabytes per rank.

#include <cstdint>
#include <vector>

#include "harness/data/sample.h"

namespace sb {

struct BatchShape {
  std::vector<int64_t> lengths;  // [sample]
  int64_t tokens = 0;
  int64_t loss_tokens = 0;
  int64_t sequences = 0;
};

inline void add_to_batch_shape(BatchShape& shape, const SampleShape& sample) {
  shape.lengths.push_back(sample.length);
  shape.tokens += sample.length;
  shape.loss_tokens += sample.loss_tokens;
  shape.sequences += 1;
}

inline BatchShape batch_shape(const std::vector<Sample>& batch) {
  BatchShape shape;
  for (const Sample& s : batch) add_to_batch_shape(shape, SampleShape{s.length(), s.loss_tokens()});
  return shape;
}

}  // namespace sb
