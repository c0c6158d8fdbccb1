#include "common/scalar_minimise.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace sb {

ScalarMinimum minimise_on_interval(const std::function<double(double)>& f, double lo, double hi, double step,
                                   double tolerance) {
  if (!(lo <= hi) || !(step > 0) || !(tolerance > 0)) {
    throw std::invalid_argument("minimise_on_interval: need lo <= hi, step > 0 and tolerance > 0");
  }
  ScalarMinimum best{lo, std::numeric_limits<double>::infinity()};
  const auto points = static_cast<int64_t>(std::floor((hi - lo) / step + 1e-9));
  for (int64_t i = 0; i <= points; ++i) {
    const double x = lo + static_cast<double>(i) * step;
    const double v = f(x);
    if (v < best.value) best = {x, v};
  }
  const double phi = (std::sqrt(5.0) - 1.0) / 2.0;
  double a = std::max(lo, best.x - step), b = std::min(hi, best.x + step);
  double c = b - phi * (b - a), d = a + phi * (b - a);
  double fc = f(c), fd = f(d);
  while (b - a > tolerance) {
    if (fc < fd) {
      b = d;
      d = c;
      fd = fc;
      c = b - phi * (b - a);
      fc = f(c);
    } else {
      a = c;
      c = d;
      fc = fd;
      d = a + phi * (b - a);
      fd = f(d);
    }
  }
  const double refined = (a + b) / 2;
  const double refined_value = f(refined);
  if (refined_value < best.value) best = {refined, refined_value};
  return best;
}

}  // namespace sb
