// Test-only: Pearson's chi-square goodness of fit of observed token counts to a filtered
// distribution, with its p-value, for the statistical tests of speculative sampling.
//
// Cells whose expected count is below 5 are pooled into one; a token drawn outside the
// distribution's support makes the fit fail outright (p-value 0). The p-value is the upper
// tail of the chi-square distribution, Q(df / 2, chi2 / 2), from the regularised incomplete
// gamma function (its series below a + 1, its continued fraction above).
#pragma once

#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "models/speculative/spec_pick.h"

namespace tandem::models::testing {

// Q(a, x) = 1 - P(a, x), the regularised upper incomplete gamma function.
inline double UpperGammaQ(double a, double x) {
  if (x <= 0) return 1.0;
  const double front = std::exp(-x + a * std::log(x) - std::lgamma(a));
  if (x < a + 1) {  // series of P
    double term = 1 / a, sum = term;
    for (double n = a + 1; std::fabs(term) > std::fabs(sum) * 1e-16; n += 1) {
      term *= x / n;
      sum += term;
    }
    return 1 - sum * front;
  }
  // Continued fraction of Q (modified Lentz).
  const double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double step = d * c;
    h *= step;
    if (std::fabs(step - 1) < 1e-16) break;
  }
  return front * h;
}

struct ChiSquareResult {
  double chi2 = 0;
  int df = 0;
  double p_value = 0;
};

// counts[id]: how often id was drawn.
inline ChiSquareResult ChiSquareTest(const std::vector<int64_t>& counts, const TokenDist& want) {
  const double n = static_cast<double>(std::accumulate(counts.begin(), counts.end(), int64_t{0}));
  ChiSquareResult r;
  double pooled_expected = 0, pooled_observed = 0;
  int cells = 0;
  for (size_t id = 0; id < counts.size(); ++id) {
    const double e = n * want.Prob(static_cast<int32_t>(id)), o = double(counts[id]);
    if (e == 0) {
      if (o > 0) return {INFINITY, 0, 0.0};
      continue;
    }
    if (e < 5) {
      pooled_expected += e;
      pooled_observed += o;
      continue;
    }
    r.chi2 += (o - e) * (o - e) / e;
    ++cells;
  }
  if (pooled_expected > 0) {
    r.chi2 +=
        (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / pooled_expected;
    ++cells;
  }
  r.df = cells - 1;
  r.p_value = r.df > 0 ? UpperGammaQ(r.df / 2.0, r.chi2 / 2) : 1.0;
  return r;
}

}  // namespace tandem::models::testing
