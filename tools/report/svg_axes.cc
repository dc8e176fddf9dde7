#include "tools/report/svg_axes.h"

#include <cmath>

#include <fmt/format.h>

namespace tandem::report {

std::vector<double> NiceTicks(Range* r, int count) {
  if (!(r->hi > r->lo)) {  // one value (or none): a unit-wide range around it
    const double pad = r->lo == 0 ? 1 : std::abs(r->lo) * 0.1;
    r->lo -= pad;
    r->hi += pad;
  }
  const double raw = (r->hi - r->lo) / std::max(count, 1);
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  r->lo = std::floor(r->lo / step) * step;
  r->hi = std::ceil(r->hi / step) * step;
  std::vector<double> ticks;
  for (double v = r->lo; v <= r->hi + step * 1e-6; v += step)
    ticks.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
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
