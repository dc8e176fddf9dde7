// CUDA fused LM head + cross-entropy with a logit transform (multiplier, soft cap) and the
// row top-k outputs, against a float64 reference of the transformed logits: odd vocabularies,
// several row chunks (the last one short), masked rows, exact ties in the top-k.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/loss/lm_head_ce.h"
#include "kernels/testing/math_testing.h"

namespace tandem::kernels {
namespace {

using testing::CompareClose;
using testing::DeviceArray;
using testing::RandomBf16;

struct TransformCase {
  int64_t rows, h, v, chunk, k;
  float multiplier, softcap;
};

class LmHeadCeTransformCuda : public ::testing::TestWithParam<TransformCase> {
 protected:
  void SetUp() override {
    auto ctx = GemmContext::Create(0);
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    ctx_ = std::move(ctx).value();
  }
  std::unique_ptr<GemmContext> ctx_;
};

TEST_P(LmHeadCeTransformCuda, MatchesFloat64Reference) {
  const auto [rows, h, v, chunk, k, m, cap] = GetParam();
  auto x = RandomBf16(rows * h, 11 + rows, -1.f, 1.f);
  auto w = RandomBf16(v * h, 12 + v, -0.5f, 0.5f);
  for (int64_t i = 0; i < h; ++i) w[(v - 1) * h + i] = w[3 * h + i];  // ids 3 and v-1 tie
  auto targets = testing::RandomI32(rows, 13, 0, static_cast<int32_t>(v));
  auto weights = testing::RandomF32(rows, 14, 0.25f, 2.f);
  if (rows > 3) {
    weights[1] = 0.f;
    targets[3] = -100;
  }
  // float64 reference: z, loss, dx.
  std::vector<double> z(rows * v), dx_ref(rows * h, 0.0);
  double wsum = 0, loss_ref = 0, zmax_abs = 0;
  for (int64_t r = 0; r < rows; ++r)
    if (targets[r] >= 0) wsum += weights[r];
  for (int64_t r = 0; r < rows; ++r) {
    double* zr = &z[r * v];
    for (int64_t j = 0; j < v; ++j) {
      double acc = 0;
      for (int64_t i = 0; i < h; ++i) acc += double(x[r * h + i].f()) * w[j * h + i].f();
      zr[j] = cap > 0 ? cap * std::tanh(m * acc / cap) : m * acc;
      zmax_abs = std::max(zmax_abs, std::fabs(zr[j]));
    }
    if (targets[r] < 0 || weights[r] == 0.f) continue;
    const double mx = *std::max_element(zr, zr + v);
    double sum = 0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(zr[j] - mx);
    const double lse = mx + std::log(sum);
    loss_ref += weights[r] * (lse - zr[targets[r]]) / wsum;
    for (int64_t j = 0; j < v; ++j) {
      const double slope = cap > 0 ? m * (1 - (zr[j] / cap) * (zr[j] / cap)) : m;
      const double g = (std::exp(zr[j] - lse) - (j == targets[r])) * weights[r] / wsum * slope;
      for (int64_t i = 0; i < h; ++i) dx_ref[r * h + i] += g * w[j * h + i].f();
    }
  }

  DeviceArray<bf16> dx(x), dw(w), ddh(rows * h);
  DeviceArray<int32_t> dt(targets), dam(rows), dids(rows * k);
  DeviceArray<float> dwt(weights), dloss(1), dvals(rows * k);
  DeviceArray<uint8_t> dcor(rows);
  const int64_t ws_bytes = LmHeadCeWorkspaceBytes(rows, v, chunk);
  DeviceArray<uint8_t> ws(ws_bytes);
  LmHeadCeOutputs out{dloss.View(DType::kF32, {1}),      dam.View(DType::kI32, {rows}),
                      dcor.View(DType::kU8, {rows}),     ddh.View(DType::kBF16, {rows, h}),
                      dids.View(DType::kI32, {rows, k}), dvals.View(DType::kF32, {rows, k})};
  Status st = LmHeadCrossEntropy(
      ctx_.get(), dx.View(DType::kBF16, {rows, h}), dw.View(DType::kBF16, {v, h}),
      dt.View(DType::kI32, {rows}), dwt.View(DType::kF32, {rows}), out,
      ws.View(DType::kU8, {ws_bytes}), chunk, nullptr, LmHeadCeTransform{m, cap});
  ASSERT_TRUE(st.ok()) << st.ToString();

  // The device rounds the logits to bf16 (2^-9 relative) before the transform: z moves by
  // <~ m |logit| 2^-9, which is |z| 2^-9 without a cap and below cap * max_u(u (1 - tanh^2 u))
  // * 2^-9 < cap 2^-9 with one. Loss as in the plain test, scaled by m.
  const double z_tol = 2 * std::max<double>(zmax_abs, cap) / 256 + 1e-6;
  EXPECT_NEAR(dloss.ToHost()[0], loss_ref, 1e-2 * std::max(1.f, m));
  const auto argmax = dam.ToHost(), ids = dids.ToHost();
  const auto correct = dcor.ToHost();
  const auto vals = dvals.ToHost();
  for (int64_t r = 0; r < rows; ++r) {
    const double* zr = &z[r * v];
    std::vector<double> sorted(zr, zr + v);
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    ASSERT_GE(argmax[r], 0);
    ASSERT_LT(argmax[r], v);
    EXPECT_GE(zr[argmax[r]], sorted[0] - z_tol) << "row " << r;
    EXPECT_EQ(correct[r], targets[r] >= 0 && weights[r] != 0.f && argmax[r] == targets[r]);
    for (int64_t i = 0; i < k; ++i) {
      const int32_t id = ids[r * k + i];
      ASSERT_GE(id, 0);
      ASSERT_LT(id, v);
      // Rank i holds a value within bf16 rounding of the i-th largest, and its own z.
      EXPECT_NEAR(zr[id], sorted[i], z_tol) << "row " << r << " rank " << i;
      EXPECT_NEAR(vals[r * k + i], zr[id], z_tol) << "row " << r << " rank " << i;
      if (i > 0) {
        const float prev = vals[r * k + i - 1], cur = vals[r * k + i];
        EXPECT_GE(prev, cur) << "row " << r << " rank " << i;
        if (prev == cur) {
          EXPECT_LT(ids[r * k + i - 1], id) << "tie order, row " << r;
        }
        for (int64_t j = 0; j < i; ++j) ASSERT_NE(ids[r * k + j], id) << "duplicate id";
      }
    }
  }
  // dhidden: as the plain test (bf16 logits, g rounded to bf16, bf16 GEMM output).
  const auto dh = ddh.ToHost();
  double scale = 0;
  for (double d : dx_ref) scale = std::max(scale, std::fabs(d));
  auto rep = CompareClose(
      rows * h, [&](int64_t i) { return dh[i].f(); }, [&](int64_t i) { return dx_ref[i]; },
      3e-2 * scale, 3e-2);
  EXPECT_TRUE(rep.ok) << rep.ToString();
}

INSTANTIATE_TEST_SUITE_P(Shapes, LmHeadCeTransformCuda,
                         ::testing::Values(TransformCase{129, 64, 1001, 32, 64, 0.5f, 30.f},
                                           TransformCase{33, 128, 4099, 8, 5, 2.f, 5.f},
                                           TransformCase{7, 64, 1001, 2048, 1, 1.f, 0.f},
                                           TransformCase{50, 64, 15193, 16, 17, 1.5f, 0.f},
                                           TransformCase{20, 64, 999, 6, 8, 1.f, 1.f}));

}  // namespace
}  // namespace tandem::kernels
