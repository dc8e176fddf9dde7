#include "tools/report/svg_axes.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace tandem::report {

std::vector<double> NiceTicks(Range* r, int count) {
  count = std::clamp(count, 1, 50);
  // Values beyond +-1e300 (or not finite) would overflow hi - lo, and below 1e-300 underflow
  // the step; such a metric is broken anyway, so its axis just stays finite.
  auto tame = [](double v, double if_not_finite) {
    if (!std::isfinite(v)) return if_not_finite;
    return std::abs(v) < 1e-300 ? 0.0 : std::clamp(v, -1e300, 1e300);
  };
  double lo = tame(r->lo, 0), hi = tame(r->hi, 1);
  if (lo > hi) std::swap(lo, hi);
  // A range narrower than a millionth of its magnitude (one value, or values an ulp apart such
  // as 1e17 and 1e17 + 16) is drawn as one value, +-10% around it: a step below the values'
  // ulp could never advance from one tick to the next.
  if (hi - lo <= std::max(std::abs(lo), std::abs(hi)) * 1e-6) {
    const double mid = lo / 2 + hi / 2;
    const double pad = mid == 0 ? 1 : std::abs(mid) * 0.1;
    lo = mid - pad;
    hi = mid + pad;
  }
  const double raw = (hi - lo) / count;
  const double p10 = std::pow(10, std::floor(std::log10(raw)));
  double step = p10;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * p10;
    if (step >= raw) break;
  }
  r->lo = std::floor(lo / step) * step;
  r->hi = std::ceil(hi / step) * step;
  // Ticks by index, not by repeated addition: a bounded count whatever the arithmetic does.
  const double n = std::round((r->hi - r->lo) / step);
  const int ticks_n = static_cast<int>(std::clamp(n, 0.0, 4.0 * count + 2)) + 1;
  std::vector<double> ticks;
  ticks.reserve(ticks_n);
  for (int i = 0; i < ticks_n; ++i) {
    const double v = r->lo + i * step;
    ticks.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
  }
  r->hi = ticks.back();
  return ticks;
}

std::string TickLabel(double v) {
  if (v != 0 && (std::abs(v) >= 1e6 || std::abs(v) < 1e-3)) return fmt::format("{:.2g}", v);
  std::string s = fmt::format("{:.4f}", v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

}  // namespace tandem::report
