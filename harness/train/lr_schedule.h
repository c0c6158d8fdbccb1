#pragma once
// Learning rate at an iteration: linear warm-up over the first
// round(lr_warmup_fraction * iterations) iterations (reaching lr at the end of
// warm-up), then cosine decay from lr to lr * min_lr_ratio at the last iteration.

#include <cstdint>

#include "harness/config/manifest.h"

namespace sb {

double learning_rate_at(int64_t iteration, const TrainSection& train);

}  // namespace sb
