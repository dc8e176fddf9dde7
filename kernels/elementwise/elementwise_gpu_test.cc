// GPU tests of residual add, casts, scale, embedding gather and concat+noise: CUDA against the CPU
// reference, bit for bit (each output is one correctly rounded fp32 operation or a copy),
// over odd sizes and misaligned views (the scalar fallback).
#include <gtest/gtest.h>

#include "kernels/elementwise/concat_noise.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/elementwise/embedding.h"
#include "kernels/testing/gpu.h"

namespace tandem::kernels {
namespace {

using testing::BitEqual;
using testing::Pool;
using testing::ToDevice;
using testing::ToHost;

TEST(ElementwiseGpuTest, ResidualAddAndCastsAreBitExact) {
  for (int64_t n : {1, 7, 127, 4104 * 3 + 5, 1 << 20}) {
    for (int64_t skip : {0, 1}) {  // skip = 1: views start 2 bytes in (unaligned path)
      const int64_t m = n - skip > 0 ? n - skip : n;
      std::vector<bf16> a = testing::RandomBf16(n, 1, -50, 50), b = testing::RandomBf16(n, 2);
      Tensor ga = ToDevice(a, DType::kBF16, {n}), gb = ToDevice(b, DType::kBF16, {n});
      Tensor go = Tensor::Empty(Pool(), DType::kBF16, {n}).value();
      TensorView va = ga.view().Narrow(0, n - m, m), vb = gb.view().Narrow(0, n - m, m),
                 vo = go.view().Narrow(0, n - m, m);
      ASSERT_TRUE(ResidualAdd(vo, va, vb, nullptr).ok());
      std::vector<bf16> want(m);
      ASSERT_TRUE(cpu::ResidualAdd(TensorView(want.data(), DType::kBF16, {m}),
                                   TensorView(a.data() + n - m, DType::kBF16, {m}),
                                   TensorView(b.data() + n - m, DType::kBF16, {m}), nullptr)
                      .ok());
      EXPECT_TRUE(BitEqual(ToHost<bf16>(vo), want)) << "n=" << n << " skip=" << skip;

      Tensor gf = Tensor::Empty(Pool(), DType::kF32, {m}).value();
      Tensor gback = Tensor::Empty(Pool(), DType::kBF16, {m}).value();
      ASSERT_TRUE(Cast(gf, vo, nullptr).ok());
      std::vector<float> f = ToHost<float>(gf);
      for (int64_t i = 0; i < m; ++i) ASSERT_EQ(f[i], want[i].f()) << i;
      std::vector<float> noisy = testing::RandomFloats(m, 3, -1e3f, 1e3f);
      Tensor gn = ToDevice(noisy, DType::kF32, {m});
      ASSERT_TRUE(Cast(gback, gn, nullptr).ok());
      EXPECT_TRUE(BitEqual(ToHost<bf16>(gback), testing::ToBf16(noisy)));
    }
  }
}

TEST(ElementwiseGpuTest, ScaleMatchesCpuBitForBit) {
  for (int64_t n : {1, 7, 127, 4104 * 3 + 5, 1 << 20}) {
    for (int64_t skip : {0, 1}) {  // skip = 1: views start one element in (unaligned path)
      const int64_t m = n - skip > 0 ? n - skip : n;
      for (float scale : {1.5f, -0.37f}) {
        std::vector<bf16> a = testing::RandomBf16(n, 8, -50, 50);
        std::vector<float> f = testing::RandomFloats(n, 9, -1e3f, 1e3f);
        std::vector<bf16> want(m);
        std::vector<float> want_f(m);
        ASSERT_TRUE(cpu::Scale(TensorView(want.data(), DType::kBF16, {m}),
                               TensorView(a.data() + n - m, DType::kBF16, {m}), scale, nullptr)
                        .ok());
        ASSERT_TRUE(cpu::Scale(TensorView(want_f.data(), DType::kF32, {m}),
                               TensorView(f.data() + n - m, DType::kF32, {m}), scale, nullptr)
                        .ok());
        // bf16 out of place, f32 in place.
        Tensor ga = ToDevice(a, DType::kBF16, {n}), gf = ToDevice(f, DType::kF32, {n});
        Tensor go = Tensor::Empty(Pool(), DType::kBF16, {n}).value();
        const TensorView va = ga.view().Narrow(0, n - m, m), vo = go.view().Narrow(0, n - m, m),
                         vf = gf.view().Narrow(0, n - m, m);
        ASSERT_TRUE(Scale(vo, va, scale, nullptr).ok());
        ASSERT_TRUE(Scale(vf, vf, scale, nullptr).ok());
        EXPECT_TRUE(BitEqual(ToHost<bf16>(vo), want)) << "n=" << n << " skip=" << skip;
        const std::vector<float> got_f = ToHost<float>(vf);
        for (int64_t i = 0; i < m; ++i) ASSERT_EQ(got_f[i], want_f[i]) << "n=" << n << " i=" << i;
      }
    }
  }
}

TEST(EmbeddingGpuTest, GatherMatchesCpu) {
  for (int64_t h : {1, 7, 4096, 4104}) {
    const int64_t v = 1000, t = 1003;
    std::vector<bf16> w = testing::RandomBf16(v * h, 4), want(t * h);
    std::vector<int32_t> ids(t);
    for (int64_t i = 0; i < t; ++i)
      ids[i] = static_cast<int32_t>((i * 37) % (v + 3)) - 1;  // some invalid
    ASSERT_TRUE(cpu::EmbeddingForward(TensorView(want.data(), DType::kBF16, {t, h}),
                                      TensorView(ids.data(), DType::kI32, {t}),
                                      TensorView(w.data(), DType::kBF16, {v, h}), nullptr)
                    .ok());
    Tensor gw = ToDevice(w, DType::kBF16, {v, h}), gi = ToDevice(ids, DType::kI32, {t});
    Tensor go = Tensor::Empty(Pool(), DType::kBF16, {t, h}).value();
    ASSERT_TRUE(EmbeddingForward(go, gi, gw, nullptr).ok());
    EXPECT_TRUE(BitEqual(ToHost<bf16>(go), want)) << "h=" << h;
  }
}

TEST(ConcatNoiseGpuTest, MatchesCpuBitForBit) {
  for (int64_t k : {1, 5})
    for (int64_t h : {1, 7, 4096, 4104})
      for (int64_t t : {1, 3, 1000})
        for (float noise : {0.f, 0.05f}) {
          std::vector<std::vector<bf16>> xs;
          std::vector<TensorView> cin, gin;
          std::vector<Tensor> gx;
          for (int64_t i = 0; i < k; ++i) xs.push_back(testing::RandomBf16(t * h, 10 + i, -4, 4));
          for (int64_t i = 0; i < k; ++i) {
            cin.emplace_back(xs[i].data(), DType::kBF16, Shape{t, h});
            gx.push_back(ToDevice(xs[i], DType::kBF16, {t, h}));
            gin.push_back(gx.back().view());
          }
          std::vector<bf16> want(t * k * h);
          ASSERT_TRUE(cpu::ConcatNoiseForward(TensorView(want.data(), DType::kBF16, {t, k * h}),
                                              cin, noise, 77, 5, nullptr)
                          .ok());
          Tensor go = Tensor::Empty(Pool(), DType::kBF16, {t, k * h}).value();
          ASSERT_TRUE(ConcatNoiseForward(go, gin, noise, 77, 5, nullptr).ok());
          EXPECT_TRUE(BitEqual(ToHost<bf16>(go), want))
              << "k=" << k << " h=" << h << " t=" << t << " noise=" << noise;
        }
}

}  // namespace
}  // namespace tandem::kernels
