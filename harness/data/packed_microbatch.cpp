#include "harness/data/packed_microbatch.h"

#include <ATen/ATen.h>

#include <stdexcept>

namespace sb {

PackedMicroBatch pack_microbatch(const std::vector<const Sample*>& samples) {
  if (samples.empty()) throw std::invalid_argument("pack_microbatch: no samples");
  std::vector<int64_t> lengths;
  for (const Sample* s : samples) lengths.push_back(s->length());
  PackedMicroBatch mb;
  mb.sequences = PackedSequences::from_lengths(lengths);
  const int64_t total = mb.sequences.total_tokens();
  std::vector<int64_t> tokens(total), positions(total), labels(total, kIgnoreLabel);
  int64_t offset = 0;
  for (const Sample* s : samples) {
    const int64_t length = s->length();
    for (int64_t t = 0; t < length; ++t) {
      tokens[offset + t] = s->tokens[t];
      positions[offset + t] = t;
      // Position t predicts token t + 1 when that token is a target (sample.h).
      if (t + 1 < length && s->is_target(t + 1)) {
        labels[offset + t] = s->tokens[t + 1];
        ++mb.loss_tokens;
      }
    }
    offset += length;
  }
  auto opts = at::TensorOptions().dtype(at::kLong);
  mb.tokens = at::tensor(tokens, opts);
  mb.position_ids = at::tensor(positions, opts);
  mb.labels = at::tensor(labels, opts);
  return mb;
}

}  // namespace sb
