// GPU tests of RoPE: CUDA against the CPU reference over odd and model shapes, partial
// rotation, and in-place use.
#include <gtest/gtest.h>

#include <tuple>

#include "kernels/rope/rope.h"
#include "kernels/testing/gpu.h"

namespace tandem::kernels {
namespace {

// Same fp32 angles on both sides; sincosf (<= 2 ulp) vs glibc sin/cos and FMA contraction
// move the fp32 result by ~1e-6 * |x| before rounding, which may flip one bf16 ulp (2^-7
// relative to the value).
constexpr double kUlpRtol = testing::kOneBf16UlpRtol;
constexpr double kAtol = 1e-5;

// (tokens, heads, head_dim, rotary_dim)
class RopeGpuTest
    : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t, int64_t>> {};

TEST_P(RopeGpuTest, CudaMatchesCpuForwardBackwardAndInPlace) {
  const auto [t, heads, hd, rd] = GetParam();
  const Shape shape{t, heads, hd};
  std::vector<bf16> x = testing::RandomBf16(t * heads * hd, 1, -2, 2), y(x.size()), dx(x.size());
  std::vector<int32_t> pos(t);
  for (int64_t i = 0; i < t; ++i) pos[i] = static_cast<int32_t>((i * 7919) % 40960);
  const RopeConfig cfg{rd, 1e6};
  const TensorView cp(pos.data(), DType::kI32, {t});
  ASSERT_TRUE(cpu::RopeForward(TensorView(y.data(), DType::kBF16, shape),
                               TensorView(x.data(), DType::kBF16, shape), cp, cfg, nullptr)
                  .ok());
  ASSERT_TRUE(cpu::RopeBackward(TensorView(dx.data(), DType::kBF16, shape),
                                TensorView(x.data(), DType::kBF16, shape), cp, cfg, nullptr)
                  .ok());
  Tensor gx = testing::ToDevice(x, DType::kBF16, shape),
         gp = testing::ToDevice(pos, DType::kI32, {t});
  Tensor gy = Tensor::Empty(testing::Pool(), DType::kBF16, shape).value();
  Tensor gdx = Tensor::Empty(testing::Pool(), DType::kBF16, shape).value();
  ASSERT_TRUE(RopeForward(gy, gx, gp, cfg, nullptr).ok());
  ASSERT_TRUE(RopeBackward(gdx, gx, gp, cfg, nullptr).ok());
  EXPECT_TRUE(testing::AllClose(testing::ToHost<bf16>(gy), y, kAtol, kUlpRtol, "out"));
  EXPECT_TRUE(testing::AllClose(testing::ToHost<bf16>(gdx), dx, kAtol, kUlpRtol, "dx"));
  ASSERT_TRUE(RopeForward(gx, gx, gp, cfg, nullptr).ok());  // in place
  EXPECT_TRUE(testing::BitEqual(testing::ToHost<bf16>(gx), testing::ToHost<bf16>(gy)));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, RopeGpuTest,
    ::testing::Values(std::make_tuple(1, 1, 2, 2), std::make_tuple(3, 1, 14, 6),
                      std::make_tuple(1000, 3, 14, 14), std::make_tuple(3, 32, 128, 128),
                      std::make_tuple(1000, 8, 128, 128), std::make_tuple(1000, 4, 256, 64),
                      std::make_tuple(1000, 2, 80, 48), std::make_tuple(1, 7, 128, 64)));

}  // namespace
}  // namespace tandem::kernels
