#pragma once
// What planning and the iteration record need of a global batch: each sample's length
// (in batch order) and the batch's token, loss-token and sequence counts. The trainer
// and the simulator both take it from the same drawn batch.

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

inline BatchShape batch_shape(const std::vector<Sample>& batch) {
  BatchShape shape;
  for (const Sample& s : batch) {
    shape.lengths.push_back(s.length());
    shape.tokens += s.length();
    shape.loss_tokens += s.loss_tokens();
  }
  shape.sequences = static_cast<int64_t>(batch.size());
  return shape;
}

}  // namespace sb
