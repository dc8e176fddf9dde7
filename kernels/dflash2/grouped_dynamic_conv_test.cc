// The grouped dynamic causal convolution: a hand-computed case, finite-difference gradients
// of the whole wrapped branch (dynamic weights from the branch input, prepare conv, a row-wise
// branch, finish conv) in float64 on packed segments of lengths 1, 5 and 17, causality, and
// the segment (block) boundary rule.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/dflash2/grouped_dynamic_conv.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels::dflash2 {
namespace {

using testing::AllClose;
using testing::Dot;
using testing::NumericalGradient;
using testing::ToDouble;
using testing::RandomFloats;

std::vector<double> RandomDoubles(int64_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  std::vector<float> f = RandomFloats(n, seed, lo, hi);
  return ToDouble(std::span<const float>(f));
}

// Row positions inside their segments for segments of the given lengths, packed.
std::vector<int32_t> Positions(const std::vector<int>& lengths) {
  std::vector<int32_t> pos;
  for (int n : lengths)
    for (int i = 0; i < n; ++i) pos.push_back(i);
  return pos;
}

TEST(GroupedDynamicConvTest, HandComputed) {
  // H = 2 in one group, K = 2; segments of 3 and 1 rows.
  ConvShape s{.rows = 4, .hidden = 2, .taps = 2, .group = 2};
  const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<double> base = {1, 1, 0.5, -1};           // [K, H]
  const std::vector<double> d = {0.1, 0.2, 0, 1, -1, 0, 2, 3};  // [rows, K * G]
  const std::vector<int32_t> pos = {0, 1, 2, 0};
  std::vector<double> y(8);
  GroupedDynamicConvForward(s, x.data(), base.data(), d.data(), 2, pos.data(), y.data());
  // y0 = 1.1 * x0 (no row before the segment); y1 = 1 * x1 + (0.5 + 1, -1 + 1) * x0;
  // y2 = 0 * x2 + (0.5, -1) * x1; y3 = 3 * x3 (a new segment: row 2 is not read).
  const std::vector<double> want = {1.1, 2.2, 4.5, 4, 1.5, -4, 21, 24};
  EXPECT_TRUE(AllClose(y, want, 1e-12, 0, "y"));
}

// The whole wrapped branch with z = tanh(y . M^T) standing in for attention / the MLP
// (row-wise, so that any mixing across rows comes from the convolutions).
struct Module {
  ConvShape s;
  std::vector<int32_t> pos;
  std::vector<double> m;  // [H, H]

  int64_t ld() const { return 2 * s.taps * s.groups(); }

  std::vector<double> Forward(const std::vector<double>& u, const std::vector<double>& w,
                              const std::vector<double>& base, std::vector<double>* d_out = nullptr,
                              std::vector<double>* y_out = nullptr,
                              std::vector<double>* z_out = nullptr) const {
    const int64_t H = s.hidden, KH = s.taps * H;
    std::vector<double> d(static_cast<size_t>(s.rows * ld())), y(u.size()), z(u.size()),
        out(u.size());
    DynamicKernelForward(s, u.data(), w.data(), d.data());
    GroupedDynamicConvForward(s, u.data(), base.data(), d.data(), ld(), pos.data(), y.data());
    for (int64_t t = 0; t < s.rows; ++t)
      for (int64_t i = 0; i < H; ++i) {
        double acc = 0;
        for (int64_t c = 0; c < H; ++c) acc += y[t * H + c] * m[i * H + c];
        z[t * H + i] = std::tanh(acc);
      }
    GroupedDynamicConvForward(s, z.data(), base.data() + KH, d.data() + s.taps * s.groups(),
                              ld(), pos.data(), out.data());
    if (d_out) *d_out = d;
    if (y_out) *y_out = y;
    if (z_out) *z_out = z;
    return out;
  }

  // dL/du, dL/dw, dL/dbase for L = <out, probe>.
  void Backward(const std::vector<double>& u, const std::vector<double>& w,
                const std::vector<double>& base, const std::vector<double>& probe,
                std::vector<double>* du, std::vector<double>* dw,
                std::vector<double>* dbase) const {
    const int64_t H = s.hidden, KH = s.taps * H, KG = s.taps * s.groups();
    std::vector<double> d, y, z;
    Forward(u, w, base, &d, &y, &z);
    du->assign(u.size(), 0);
    dw->assign(w.size(), 0);
    dbase->assign(base.size(), 0);
    std::vector<double> dd(d.size(), 0), dz(u.size(), 0), dy(u.size(), 0);
    GroupedDynamicConvBackward(s, z.data(), base.data() + KH, d.data() + KG, ld(), pos.data(),
                               probe.data(), dz.data(), dbase->data() + KH, dd.data() + KG);
    for (int64_t t = 0; t < s.rows; ++t)
      for (int64_t i = 0; i < H; ++i) {
        const double g = dz[t * H + i] * (1 - z[t * H + i] * z[t * H + i]);
        for (int64_t c = 0; c < H; ++c) dy[t * H + c] += g * m[i * H + c];
      }
    GroupedDynamicConvBackward(s, u.data(), base.data(), d.data(), ld(), pos.data(), dy.data(),
                               du->data(), dbase->data(), dd.data());
    DynamicKernelBackward(s, u.data(), w.data(), dd.data(), du->data(), dw->data());
  }
};

Module MakeModule(int64_t taps, const std::vector<int>& lengths) {
  Module mod;
  mod.pos = Positions(lengths);
  mod.s = ConvShape{.rows = static_cast<int64_t>(mod.pos.size()), .hidden = 24, .taps = taps,
                    .group = 8};
  mod.m = RandomDoubles(24 * 24, 7, -0.3f, 0.3f);
  return mod;
}

class GroupedDynamicConvGradTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(GroupedDynamicConvGradTest, FiniteDifferencesOnPackedSegments) {
  const Module mod = MakeModule(GetParam(), {1, 5, 17});
  const ConvShape& s = mod.s;
  const std::vector<double> u = RandomDoubles(s.rows * s.hidden, 1);
  const std::vector<double> w = RandomDoubles(mod.ld() * s.hidden, 2, -0.4f, 0.4f);
  std::vector<double> base = RandomDoubles(2 * s.taps * s.hidden, 3, -0.5f, 0.5f);
  const std::vector<double> probe = RandomDoubles(s.rows * s.hidden, 4);
  std::vector<double> du, dw, dbase;
  mod.Backward(u, w, base, probe, &du, &dw, &dbase);

  auto loss_u = [&](const std::vector<double>& v) { return Dot(mod.Forward(v, w, base), probe); };
  auto loss_w = [&](const std::vector<double>& v) { return Dot(mod.Forward(u, v, base), probe); };
  auto loss_b = [&](const std::vector<double>& v) { return Dot(mod.Forward(u, w, v), probe); };
  EXPECT_TRUE(AllClose(du, NumericalGradient(loss_u, u), 1e-8, 1e-6, "du"));
  EXPECT_TRUE(AllClose(dw, NumericalGradient(loss_w, w), 1e-8, 1e-6, "dw"));
  EXPECT_TRUE(AllClose(dbase, NumericalGradient(loss_b, base), 1e-8, 1e-6, "dbase"));
}

INSTANTIATE_TEST_SUITE_P(Taps, GroupedDynamicConvGradTest, ::testing::Values(3, 4));

// Changing row t0's input changes no output before t0 and none in other segments, and does
// change outputs at and after t0 in its own segment.
TEST(GroupedDynamicConvTest, CausalInsideItsSegment) {
  const Module mod = MakeModule(3, {1, 5, 17});
  const ConvShape& s = mod.s;
  std::vector<double> u = RandomDoubles(s.rows * s.hidden, 11);
  const std::vector<double> w = RandomDoubles(mod.ld() * s.hidden, 12, -0.4f, 0.4f);
  const std::vector<double> base = RandomDoubles(2 * s.taps * s.hidden, 13, -0.5f, 0.5f);
  const std::vector<double> before = mod.Forward(u, w, base);
  for (int64_t t0 : {2, 10, 22}) {  // rows of the 5-row and the 17-row segment
    std::vector<double> v = u;
    for (int64_t c = 0; c < s.hidden; ++c) v[t0 * s.hidden + c] += 0.5;
    const std::vector<double> after = mod.Forward(v, w, base);
    const int64_t seg_end = t0 < 6 ? 6 : s.rows;
    for (int64_t t = 0; t < s.rows; ++t) {
      bool same = true;
      for (int64_t c = 0; c < s.hidden; ++c)
        same = same && after[t * s.hidden + c] == before[t * s.hidden + c];
      // Two convolutions of K taps: rows t0 .. t0 + 2 (K - 1) of the segment see row t0.
      const bool reached = t >= t0 && t < seg_end && t <= t0 + 2 * (s.taps - 1);
      EXPECT_EQ(same, !reached) << "t0 " << t0 << " row " << t;
    }
  }
}

// Packed segments give exactly what each segment gives alone; without the reset (positions
// counted across the whole batch) the first rows of the later segments would differ.
TEST(GroupedDynamicConvTest, SegmentBoundariesResetTheTaps) {
  const std::vector<int> lengths = {1, 5, 17};
  const Module packed = MakeModule(4, lengths);
  const ConvShape& s = packed.s;
  const std::vector<double> u = RandomDoubles(s.rows * s.hidden, 21);
  const std::vector<double> w = RandomDoubles(packed.ld() * s.hidden, 22, -0.4f, 0.4f);
  const std::vector<double> base = RandomDoubles(2 * s.taps * s.hidden, 23, -0.5f, 0.5f);
  const std::vector<double> out = packed.Forward(u, w, base);
  int64_t start = 0;
  for (int n : lengths) {
    Module alone = MakeModule(4, {n});
    const std::vector<double> part(u.begin() + start * s.hidden,
                                   u.begin() + (start + n) * s.hidden);
    const std::vector<double> got = alone.Forward(part, w, base);
    const std::vector<double> want(out.begin() + start * s.hidden,
                                   out.begin() + (start + n) * s.hidden);
    EXPECT_EQ(got, want) << "segment at row " << start;
    start += n;
  }
  Module unreset = packed;
  unreset.pos = Positions({static_cast<int>(s.rows)});
  const std::vector<double> mixed = unreset.Forward(u, w, base);
  for (int64_t t : {1, 6})
    EXPECT_NE(mixed[t * s.hidden], out[t * s.hidden]) << "row " << t;
}

}  // namespace
}  // namespace tandem::kernels::dflash2
