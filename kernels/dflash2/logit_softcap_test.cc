// The output multiplier and final logit soft cap: hand values, saturation below the cap, no
// cap, and the gradient by finite differences in float64.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/dflash2/logit_softcap.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels::dflash2 {
namespace {

using testing::AllClose;
using testing::Dot;
using testing::NumericalGradient;

TEST(LogitSoftcapTest, HandValues) {
  const std::vector<double> x = {1.5, -0.75, 0, 1000};
  std::vector<double> y(4);
  LogitSoftcapForward<double>(4, 2.0, 3.0, x.data(), y.data());
  // cap * tanh(x * m / cap): 3 tanh(1), 3 tanh(-0.5), 0, and a large logit just under 3.
  const std::vector<double> want = {3 * std::tanh(1.0), 3 * std::tanh(-0.5), 0, 3.0};
  EXPECT_TRUE(AllClose(y, want, 1e-12, 0, "capped"));
  EXPECT_NEAR(y[0], 2.2847824679, 1e-9);
  LogitSoftcapForward<double>(4, 2.0, 0.0, x.data(), y.data());
  EXPECT_EQ(y, (std::vector<double>{3, -1.5, 0, 2000}));  // no cap: x * m
}

TEST(LogitSoftcapTest, FiniteDifferences) {
  const std::vector<double> x = {-7, -2.5, -0.3, 0, 0.4, 1.9, 6.5};
  const std::vector<double> probe = {0.3, -1.1, 0.7, 0.2, -0.4, 0.9, 1.3};
  for (double cap : {0.0, 2.5, 30.0}) {
    std::vector<double> dx(x.size());
    LogitSoftcapBackward<double>(7, 1.7, cap, x.data(), probe.data(), dx.data());
    auto f = [&](const std::vector<double>& v) {
      std::vector<double> y(v.size());
      LogitSoftcapForward<double>(7, 1.7, cap, v.data(), y.data());
      return Dot(y, probe);
    };
    EXPECT_TRUE(AllClose(dx, NumericalGradient(f, x), 1e-9, 1e-7, "dx")) << "cap " << cap;
  }
}

}  // namespace
}  // namespace tandem::kernels::dflash2
