#pragma once
// Minimising a function of one variable on an interval for the simulator's fits: a grid
// of `step` from lo to hi, then golden-section refinement (to `tolerance`) on the grid
// cells either side of the best grid point. For functions with one minimum near the grid's
// resolution; the grid keeps a second, distant dip from misleading the refinement.

#include <functional>

namespace sb {

struct ScalarMinimum {
  double x = 0;
  double value = 0;
};

// Throws std::invalid_argument unless lo <= hi, step > 0 and tolerance > 0.
ScalarMinimum minimise_on_interval(const std::function<double(double)>& f, double lo, double hi, double step,
                                   double tolerance);

}  // namespace sb
