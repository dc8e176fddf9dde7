// Axis arithmetic for svg_chart: "nice" tick values (1, 2, 5 x 10^k) covering a range, tick
// labels, and the mapping from data to pixels.
// Thread-safety: pure functions and value types.
#pragma once

#include <string>
#include <vector>

namespace tandem::report {

struct Range {
  double lo = 0;
  double hi = 1;
};

// Ticks at a 1-2-5 step covering [r.lo, r.hi], about `count` of them (never more than
// 4 * count + 3, whatever the values); also widens `r` to the outer ticks so the data sits
// inside the axes. A range narrower than a millionth of its magnitude is drawn as one value
// (+-10% around it); values beyond +-1e300 or not finite are clamped.
std::vector<double> NiceTicks(Range* r, int count);
// A tick label: short, no trailing zeros ("0.5", "1200", "1.5e+06").
std::string TickLabel(double v);

// Data -> pixel for one axis (pixels grow down for y: pass the pixel ends reversed).
struct Scale {
  Range data;
  double px0 = 0;
  double px1 = 1;
  double operator()(double v) const {
    const double span = data.hi - data.lo;
    return px0 + (span == 0 ? 0.5 : (v - data.lo) / span) * (px1 - px0);
  }
};

}  // namespace tandem::report
