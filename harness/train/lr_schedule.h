#pragma once
// Learning rate at an iteration: linear warm-up over the first
// round(lr_warmup_fraction * iterations) iterations (reaching lr at the end of
// warm-up), then, by train.lr_schedule,
//   "cosine":   cosine decay from lr to lr * min_lr_ratio at the last iteration;
//   "constant": lr until the end (min_lr_ratio unused).

#include <cstdint>
#include <string>
#include <vector>

#include "harness/config/manifest.h"

namespace sb {

double learning_rate_at(int64_t iteration, const TrainSection& train);

}  // namespace sb
