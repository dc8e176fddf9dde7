// CUDA fused LM head + cross-entropy against the float64 naive version (full logits) and
// the CPU reference: odd vocabularies (1001, 15193 ~ 151936/10), several row chunks, masked
// rows, forward-only mode, workspace checks.
#include <cmath>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kernels/loss/lm_head_ce.h"
#include "kernels/testing/math_testing.h"

namespace tandem::kernels {
namespace {

using testing::CompareClose;
using testing::DeviceArray;
using testing::NaiveLmHeadCe;
using testing::RandomBf16;
using testing::RandomI32;
using testing::ToFloat;

class LmHeadCeCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ctx = GemmContext::Create(0);
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    ctx_ = std::move(ctx).value();
  }

  void RunCase(int64_t rows, int64_t h, int64_t v, int64_t chunk, bool backward) {
    SCOPED_TRACE(::testing::Message() << "R=" << rows << " H=" << h << " V=" << v
                                      << " chunk=" << chunk << " backward=" << backward);
    auto x = RandomBf16(rows * h, 1 + rows, -1.f, 1.f);
    auto w = RandomBf16(v * h, 2 + v, -0.5f, 0.5f);
    auto targets = RandomI32(rows, 3, 0, static_cast<int32_t>(v));
    auto weights = testing::RandomF32(rows, 4, 0.25f, 2.f);
    if (rows > 3) {
      weights[1] = 0.f;
      targets[3] = -100;
    }
    std::vector<double> xd, wd;
    for (float f : ToFloat(x)) xd.push_back(f);
    for (float f : ToFloat(w)) wd.push_back(f);
    auto want = NaiveLmHeadCe(rows, h, v, xd, wd, targets, weights);

    DeviceArray<bf16> dx(x), dw(w), ddh(rows * h);
    DeviceArray<int32_t> dt(targets), dam(rows);
    DeviceArray<float> dwt(weights), dloss(1);
    DeviceArray<uint8_t> dcor(rows);
    int64_t ws_bytes = LmHeadCeWorkspaceBytes(rows, v, chunk);
    DeviceArray<uint8_t> ws(ws_bytes);
    LmHeadCeOutputs out{dloss.View(DType::kF32, {1}), dam.View(DType::kI32, {rows}),
                        dcor.View(DType::kU8, {rows}),
                        backward ? ddh.View(DType::kBF16, {rows, h}) : TensorView(), {}, {}};
    Status st = LmHeadCrossEntropy(ctx_.get(), dx.View(DType::kBF16, {rows, h}),
                                   dw.View(DType::kBF16, {v, h}), dt.View(DType::kI32, {rows}),
                                   dwt.View(DType::kF32, {rows}), out,
                                   ws.View(DType::kU8, {ws_bytes}), chunk, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    float loss = dloss.ToHost()[0];
    auto argmax = dam.ToHost();
    auto correct = dcor.ToHost();

    // Logits are rounded to bf16 (2^-9 relative, |logit| <~ 8 here) before the softmax, so
    // each row's logsumexp and target logit move by <~ 0.016, and the weighted mean over
    // rows by less (errors are unbiased roundings): 1e-2 absolute.
    EXPECT_NEAR(loss, want.loss, 1e-2);
    double max_logit = 0;
    for (double l : want.logits) max_logit = std::max(max_logit, std::fabs(l));
    for (int64_t r = 0; r < rows; ++r) {
      const double* l = &want.logits[r * v];
      // The chosen logit may lose a near-tie to bf16 rounding: within 2 bf16 ulps of the max.
      ASSERT_GE(argmax[r], 0);
      ASSERT_LT(argmax[r], v);
      EXPECT_GE(l[argmax[r]], *std::max_element(l, l + v) - 2 * max_logit / 256) << "row " << r;
      bool valid = targets[r] >= 0 && weights[r] != 0.f;
      EXPECT_EQ(correct[r], valid && argmax[r] == targets[r]) << "row " << r;
    }
    if (!backward) return;
    auto dh = ddh.ToHost();
    // g = softmax - onehot is built from bf16 logits (softmax off by ~|logit| 2^-9 relative),
    // rounded to bf16 once, and the dx GEMM output is rounded to bf16 once: a few percent of
    // the largest entry bounds it, with 3% relative on top.
    double scale = 0;
    for (double d : want.dx) scale = std::max(scale, std::fabs(d));
    auto rep = CompareClose(rows * h, [&](int64_t i) { return dh[i].f(); },
                            [&](int64_t i) { return want.dx[i]; }, 3e-2 * scale, 3e-2);
    EXPECT_TRUE(rep.ok) << rep.ToString();
    for (int64_t k = 0; k < h && rows > 3; ++k) {
      EXPECT_EQ(dh[1 * h + k].f(), 0.f);
      EXPECT_EQ(dh[3 * h + k].f(), 0.f);
    }
  }

  std::unique_ptr<GemmContext> ctx_;
};

TEST_F(LmHeadCeCuda, MatchesFloat64Naive) {
  RunCase(1, 64, 1001, 2048, true);
  RunCase(7, 128, 1001, 2048, true);
  RunCase(129, 128, 1001, 32, true);   // 5 chunks, last one short
  RunCase(64, 256, 15193, 48, true);   // odd vocab ~ 151936 / 10
  RunCase(33, 64, 4096, 8, true);      // vocab a multiple of 8: no scalar tail
  RunCase(129, 128, 1001, 32, false);  // forward only
}

TEST_F(LmHeadCeCuda, ChunkSizeDoesNotChangeResult) {
  // The per-row work is independent of the chunking and the loss is reduced in one fixed
  // order, so the loss must be bit-identical across chunk sizes. dHidden comes from a
  // cuBLASLt GEMM whose kernel (and so its reduction order over the vocab) cuBLASLt picks per
  // M = chunk rows: seen on the H200, 7-row and 100-row chunks differ by one bf16 ulp in a few
  // elements, and by more *relative* error only where the sum over the vocab cancels to
  // nearly zero (2.1e-6 against values of ~1e-3). So allow one bf16 ulp of the element
  // (2^-7 of its magnitude) plus one ulp of the gradient's RMS for cancelled elements.
  const int64_t rows = 100, h = 64, v = 1001;
  auto x = RandomBf16(rows * h, 5), w = RandomBf16(v * h, 6, -0.5f, 0.5f);
  auto targets = RandomI32(rows, 7, 0, v);
  std::vector<float> weights(rows, 1.f);
  DeviceArray<bf16> dx(x), dw(w);
  DeviceArray<int32_t> dt(targets);
  DeviceArray<float> dwt(weights);
  std::vector<float> losses;
  std::vector<std::vector<bf16>> grads;
  for (int64_t chunk : {7, 100}) {
    DeviceArray<float> dloss(1);
    DeviceArray<bf16> ddh(rows * h);
    int64_t ws_bytes = LmHeadCeWorkspaceBytes(rows, v, chunk);
    DeviceArray<uint8_t> ws(ws_bytes);
    LmHeadCeOutputs out{dloss.View(DType::kF32, {1}), {}, {}, ddh.View(DType::kBF16, {rows, h}),
                        {}, {}};
    ASSERT_TRUE(LmHeadCrossEntropy(ctx_.get(), dx.View(DType::kBF16, {rows, h}),
                                   dw.View(DType::kBF16, {v, h}), dt.View(DType::kI32, {rows}),
                                   dwt.View(DType::kF32, {rows}), out,
                                   ws.View(DType::kU8, {ws_bytes}), chunk, nullptr)
                    .ok());
    losses.push_back(dloss.ToHost()[0]);
    grads.push_back(ddh.ToHost());
  }
  EXPECT_EQ(losses[0], losses[1]);
  double sq = 0;
  for (int64_t i = 0; i < rows * h; ++i) sq += double(grads[1][i].f()) * grads[1][i].f();
  const float rms = static_cast<float>(std::sqrt(sq / static_cast<double>(rows * h)));
  for (int64_t i = 0; i < rows * h; ++i) {
    const float a = grads[0][i].f(), b = grads[1][i].f();
    ASSERT_LE(std::fabs(a - b), std::ldexp(std::max(std::fabs(a), std::fabs(b)) + rms, -7)) << i;
  }
}

TEST_F(LmHeadCeCuda, RejectsSmallWorkspace) {
  DeviceArray<bf16> dx(4 * 8), dw(9 * 8);
  DeviceArray<int32_t> dt(4);
  DeviceArray<float> dwt(4), dloss(1);
  DeviceArray<uint8_t> ws(64);
  Status st = LmHeadCrossEntropy(ctx_.get(), dx.View(DType::kBF16, {4, 8}),
                                 dw.View(DType::kBF16, {9, 8}), dt.View(DType::kI32, {4}),
                                 dwt.View(DType::kF32, {4}),
                                 LmHeadCeOutputs{dloss.View(DType::kF32, {1}), {}, {}, {}, {}, {}},
                                 ws.View(DType::kU8, {64}), 4, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("LmHeadCeWorkspaceBytes"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace tandem::kernels
