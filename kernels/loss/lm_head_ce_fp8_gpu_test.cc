// CUDA FP8 LM head + cross-entropy against its CPU reference twin on odd shapes: rows not a
// multiple of 4 (padded FP8 rows, a ragged last chunk), H and V not multiples of 128
// (partial scale blocks), several chunks, masked rows, forward-only, DFlash2's logit transform
// with the top-k; and the quantized head (codes, transposed codes, scales) byte-exact against
// the CPU's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "kernels/core/device_pools.h"
#include "kernels/loss/lm_head_ce_fp8.h"
#include "kernels/testing/math_testing.h"

namespace tandem::kernels {
namespace {

using testing::DeviceArray;

class LmHeadCeFp8Cuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::CheckFp8Device(0).ok()) GTEST_SKIP() << "device 0 has no FP8 tensor cores";
    auto ctx = GemmContext::Create(0);
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    ctx_ = std::move(ctx).value();
    auto pool = pools_.Pool(0);
    ASSERT_TRUE(pool.ok());
    pool_ = *pool;
  }

  void RunCase(int64_t rows, int64_t h, int64_t v, int64_t chunk, bool backward,
               const LmHeadCeTransform& t = {}, int64_t k = 0) {
    SCOPED_TRACE(::testing::Message() << "R=" << rows << " H=" << h << " V=" << v
                                      << " chunk=" << chunk << " backward=" << backward
                                      << " multiplier=" << t.multiplier << " softcap="
                                      << t.softcap << " k=" << k);
    auto x = testing::RandomBf16(rows * h, 11 + rows, -1.f, 1.f);
    auto w = testing::RandomBf16(v * h, 12 + v, -0.5f, 0.5f);
    auto targets = testing::RandomI32(rows, 13, 0, static_cast<int32_t>(v));
    auto weights = testing::RandomF32(rows, 14, 0.25f, 2.f);
    if (rows > 3) {
      weights[1] = 0.f;
      targets[3] = -100;
    }
    // CPU twin.
    auto hhead = Fp8LmHeadWeights::Quantize(TensorView(w.data(), DType::kBF16, {v, h}),
                                            HostAllocator(), nullptr);
    ASSERT_TRUE(hhead.ok()) << hhead.status().ToString();
    float want_loss = 0;
    std::vector<bf16> want_dx(rows * h);
    std::vector<int32_t> want_am(rows);
    LmHeadCeOutputs hout{TensorView(&want_loss, DType::kF32, {1}),
                         TensorView(want_am.data(), DType::kI32, {rows}), {},
                         backward ? TensorView(want_dx.data(), DType::kBF16, {rows, h})
                                  : TensorView(), {}, {}};
    std::vector<int32_t> want_ids(rows * k);
    std::vector<float> want_vals(rows * k);
    if (k > 0) {
      hout.topk_ids = TensorView(want_ids.data(), DType::kI32, {rows, k});
      hout.topk_values = TensorView(want_vals.data(), DType::kF32, {rows, k});
    }
    Status st = LmHeadCrossEntropyFp8(nullptr, TensorView(x.data(), DType::kBF16, {rows, h}),
                                      hhead->head(), TensorView(targets.data(), DType::kI32, {rows}),
                                      TensorView(weights.data(), DType::kF32, {rows}), hout,
                                      TensorView(), chunk, nullptr, t);
    ASSERT_TRUE(st.ok()) << st.ToString();

    DeviceArray<bf16> dx(x), dw(w), ddh(std::vector<bf16>(rows * h, bf16(7.f)));
    DeviceArray<int32_t> dt(targets), dam(rows);
    DeviceArray<float> dwt(weights), dloss(1);
    DeviceArray<uint8_t> dcor(rows);
    auto dhead = Fp8LmHeadWeights::Quantize(dw.View(DType::kBF16, {v, h}), *pool_, nullptr);
    ASSERT_TRUE(dhead.ok()) << dhead.status().ToString();
    // The quantized head is the CPU's, byte for byte.
    std::vector<uint8_t> bytes(dhead->nbytes()), hbytes(hhead->nbytes());
    ASSERT_EQ(bytes.size(), hbytes.size());
    auto copy_out = [&](const TensorView& t) {
      std::vector<uint8_t> b(t.nbytes());
      EXPECT_TRUE(CopyToHost(b.data(), t, nullptr).ok());
      return b;
    };
    auto host_bytes = [](const TensorView& t) {
      const auto* p = static_cast<const uint8_t*>(t.data());
      return std::vector<uint8_t>(p, p + t.nbytes());
    };
    const Fp8LmHead& g = dhead->head();
    const Fp8LmHead& c = hhead->head();
    EXPECT_EQ(copy_out(g.w.data), host_bytes(c.w.data));
    EXPECT_EQ(copy_out(g.w.scale), host_bytes(c.w.scale));
    EXPECT_EQ(copy_out(g.wt.data), host_bytes(c.wt.data));
    EXPECT_EQ(copy_out(g.wt.scale), host_bytes(c.wt.scale));

    const int64_t ws_bytes = LmHeadCeFp8WorkspaceBytes(rows, v, h, chunk);
    DeviceArray<uint8_t> ws(ws_bytes);
    LmHeadCeOutputs out{dloss.View(DType::kF32, {1}), dam.View(DType::kI32, {rows}),
                        dcor.View(DType::kU8, {rows}),
                        backward ? ddh.View(DType::kBF16, {rows, h}) : TensorView(), {}, {}};
    DeviceArray<int32_t> dids(std::max<int64_t>(rows * k, 1));
    DeviceArray<float> dvals(std::max<int64_t>(rows * k, 1));
    if (k > 0) {
      out.topk_ids = dids.View(DType::kI32, {rows, k});
      out.topk_values = dvals.View(DType::kF32, {rows, k});
    }
    st = LmHeadCrossEntropyFp8(ctx_.get(), dx.View(DType::kBF16, {rows, h}), g,
                               dt.View(DType::kI32, {rows}), dwt.View(DType::kF32, {rows}), out,
                               ws.View(DType::kU8, {ws_bytes}), chunk, nullptr, t);
    ASSERT_TRUE(st.ok()) << st.ToString();
    if (k > 0) {
      // Rank by rank the value moves by at most a bf16 logit ulp through the transform;
      // the ids agree except where two logits tie within that.
      const auto ids = dids.ToHost();
      const auto vals = dvals.ToHost();
      int64_t same = 0;
      for (int64_t i = 0; i < rows * k; ++i) {
        EXPECT_NEAR(vals[i], want_vals[i], 1e-2 * (1 + std::fabs(want_vals[i]))) << i;
        same += ids[i] == want_ids[i];
      }
      EXPECT_GE(same, rows * k - rows * k / 10) << "top-k ids differ beyond near-ties";
    }
    const float loss = dloss.ToHost()[0];
    const auto am = dam.ToHost();
    const auto cor = dcor.ToHost();
    // Same FP8 operands, same bf16 rounding points; only the order of fp32 accumulation
    // (tensor cores vs float64) differs, which moves a bf16 logit by at most one ulp
    // (2^-8 relative) now and then: the loss agrees to ~1e-3.
    EXPECT_NEAR(loss, want_loss, 2e-3 * (1 + std::fabs(want_loss)));
    int argmax_same = 0;
    for (int64_t r = 0; r < rows; ++r) {
      argmax_same += am[r] == want_am[r];
      const bool valid = targets[r] >= 0 && weights[r] != 0.f;
      EXPECT_EQ(cor[r], valid && am[r] == targets[r]) << "row " << r;
    }
    EXPECT_GE(argmax_same, rows - 1 - rows / 20) << "argmax differs beyond bf16 near-ties";
    if (!backward) {
      for (bf16 d : ddh.ToHost()) ASSERT_EQ(d.f(), 7.f) << "forward-only wrote d hidden";
      return;
    }
    // d hidden: a logit one ulp off changes g by as much, which can move g's e4m3 code by
    // one step (2^-4) for a few elements; summed over V those average out: relative L2
    // well under 1e-2, and masked rows exactly 0.
    const auto got = ddh.ToHost();
    double e = 0, ref = 0;
    for (int64_t i = 0; i < rows * h; ++i) {
      e += (got[i].f() - want_dx[i].f()) * (got[i].f() - want_dx[i].f());
      ref += want_dx[i].f() * want_dx[i].f();
    }
    EXPECT_LT(std::sqrt(e / ref), 1e-2);
    for (int64_t k = 0; k < h && rows > 3; ++k) {
      ASSERT_EQ(got[1 * h + k].f(), 0.f);
      ASSERT_EQ(got[3 * h + k].f(), 0.f);
    }
  }

  std::unique_ptr<GemmContext> ctx_;
  DevicePools pools_;  // this test's own; outlives every tensor from pool_
  CachingPool* pool_ = nullptr;
};

TEST_F(LmHeadCeFp8Cuda, MatchesCpuTwinOnOddShapes) {
  for (auto [rows, h, v, chunk] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
           {37, 144, 400, 16}, {5, 256, 1024, 2048}, {130, 128, 160, 64}, {1, 32, 48, 7}}) {
    RunCase(rows, h, v, chunk, true);
  }
  RunCase(9, 144, 400, 4, false);
  // DFlash2's transform and candidates: with a soft cap, multiplier alone, top-1 and 64.
  RunCase(37, 144, 400, 16, true, LmHeadCeTransform{0.8f, 6.0f}, 16);
  RunCase(5, 256, 1024, 2048, true, LmHeadCeTransform{1.5f, 0.0f}, 64);
  RunCase(130, 128, 160, 64, false, LmHeadCeTransform{0.5f, 3.0f}, 1);
}

TEST_F(LmHeadCeFp8Cuda, RefusesShapesCublasFp8CannotRun) {
  DeviceArray<bf16> dx(std::vector<bf16>(4 * 40)), dw(std::vector<bf16>(40 * 40));
  DeviceArray<int32_t> dt(std::vector<int32_t>(4));
  DeviceArray<float> dwt(std::vector<float>(4, 1.f)), dloss(1);
  auto head = Fp8LmHeadWeights::Quantize(dw.View(DType::kBF16, {40, 40}), *pool_, nullptr);
  ASSERT_TRUE(head.ok());
  DeviceArray<uint8_t> ws(LmHeadCeFp8WorkspaceBytes(4, 40, 40, 16));
  Status st = LmHeadCrossEntropyFp8(
      ctx_.get(), dx.View(DType::kBF16, {4, 40}), head->head(), dt.View(DType::kI32, {4}),
      dwt.View(DType::kF32, {4}), LmHeadCeOutputs{dloss.View(DType::kF32, {1}), {}, {}, {}, {}, {}},
      ws.View(DType::kU8, {ws.size()}), 16, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("multiples of 16"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace tandem::kernels
