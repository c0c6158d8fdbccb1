#include "harness/train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace sb {

double learning_rate_at(int64_t iteration, const TrainSection& train) {
  const int64_t warmup =
      static_cast<int64_t>(std::llround(train.lr_warmup_fraction * static_cast<double>(train.iterations)));
  if (iteration < warmup) {
    return train.lr * static_cast<double>(iteration + 1) / static_cast<double>(warmup);
  }
  switch (train.lr_schedule) {
    case LrSchedule::kConstant:
      return train.lr;
    case LrSchedule::kCosine: {
      const int64_t decay_steps = std::max<int64_t>(1, train.iterations - warmup - 1);
      const double progress =
          std::min(1.0, static_cast<double>(iteration - warmup) / static_cast<double>(decay_steps));
      const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
      return train.lr * (train.min_lr_ratio + (1.0 - train.min_lr_ratio) * cosine);
    }
  }
  throw std::logic_error("learning_rate_at: unhandled LrSchedule");
}

}  // namespace sb
