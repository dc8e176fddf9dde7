#include "kernels/testing/testing.h"

#include <cmath>
#include <random>

namespace tandem::kernels::testing {

std::vector<float> RandomFloats(int64_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<bf16> RandomBf16(int64_t n, uint64_t seed, float lo, float hi) {
  return ToBf16(RandomFloats(n, seed, lo, hi));
}

std::vector<float> ToFloat(std::span<const bf16> v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = v[i].f();
  return out;
}

std::vector<double> ToDouble(std::span<const bf16> v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = v[i].f();
  return out;
}

std::vector<double> ToDouble(std::span<const float> v) { return {v.begin(), v.end()}; }

std::vector<bf16> ToBf16(std::span<const float> v) {
  std::vector<bf16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16(v[i]);
  return out;
}

::testing::AssertionResult AllClose(std::span<const double> got, std::span<const double> want,
                                    double atol, double rtol, const std::string& what) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << what << ": size " << got.size() << " != expected " << want.size();
  int64_t bad = 0, worst = -1;
  double worst_excess = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double err = std::fabs(got[i] - want[i]);
    double bound = atol + rtol * std::fabs(want[i]);
    if (std::isnan(err) || err > bound) {
      ++bad;
      double excess = std::isnan(err) ? INFINITY : err / bound;
      if (worst < 0 || excess > worst_excess) {
        worst = static_cast<int64_t>(i);
        worst_excess = excess;
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  double err = std::fabs(got[worst] - want[worst]);
  return ::testing::AssertionFailure()
         << what << ": " << bad << " of " << got.size() << " elements outside atol=" << atol
         << " rtol=" << rtol << "; worst at [" << worst << "]: got " << got[worst] << ", want "
         << want[worst] << ", |err| " << err << " > bound " << atol + rtol * std::fabs(want[worst]);
}

::testing::AssertionResult AllClose(std::span<const float> got, std::span<const float> want,
                                    double atol, double rtol, const std::string& what) {
  return AllClose(ToDouble(got), ToDouble(want), atol, rtol, what);
}

::testing::AssertionResult AllClose(std::span<const bf16> got, std::span<const bf16> want,
                                    double atol, double rtol, const std::string& what) {
  return AllClose(ToDouble(got), ToDouble(want), atol, rtol, what);
}

::testing::AssertionResult BitEqual(std::span<const bf16> got, std::span<const bf16> want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i].bits != want[i].bits)
      return ::testing::AssertionFailure()
             << "first difference at [" << i << "]: got 0x" << std::hex << got[i].bits << " ("
             << got[i].f() << "), want 0x" << want[i].bits << " (" << want[i].f() << ")";
  return ::testing::AssertionSuccess();
}

std::vector<double> NumericalGradient(const std::function<double(const std::vector<double>&)>& f,
                                      std::vector<double> x, double h) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double xi = x[i];
    x[i] = xi + h;
    double fp = f(x);
    x[i] = xi - h;
    double fm = f(x);
    x[i] = xi;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

double Dot(std::span<const double> a, std::span<const double> b) {
  TANDEM_CHECK(a.size() == b.size());
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace tandem::kernels::testing
