#pragma once
// Dataset::global_batch_shape (lengths and trained tokens without token ids) against the
// drawn samples it stands for: what the planner reads must be what the ranks train on.

#include <gtest/gtest.h>

#include <cstdint>

#include "harness/data/batch_shape.h"
#include "harness/data/dataset.h"

namespace sb {

inline void expect_shapes_are_the_drawn_batches(const Dataset& data, int64_t iterations, int64_t global_batch_size) {
  for (int64_t it = 0; it < iterations; ++it) {
    const BatchShape drawn = batch_shape(data.global_batch(it, global_batch_size));
    const BatchShape shape = data.global_batch_shape(it, global_batch_size);
    EXPECT_EQ(shape.lengths, drawn.lengths) << "iteration " << it;
    EXPECT_EQ(shape.tokens, drawn.tokens) << "iteration " << it;
    EXPECT_EQ(shape.loss_tokens, drawn.loss_tokens) << "iteration " << it;
    EXPECT_EQ(shape.sequences, global_batch_size) << "iteration " << it;
    for (int64_t p = 0; p < global_batch_size; ++p) {
      EXPECT_EQ(data.batch_sample(it, global_batch_size, p).tokens, data.sample(it * global_batch_size + p).tokens);
    }
  }
}

}  // namespace sb
