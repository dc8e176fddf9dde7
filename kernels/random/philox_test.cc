// Philox4x32-10 against the Random123 known-answer vectors, and the float conversions.
#include "kernels/random/philox.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/core/memory.h"

namespace tandem::kernels {
namespace {

struct Kat {
  Philox4 ctr;
  uint32_t k0, k1;
  Philox4 want;
};

TEST(PhiloxTest, MatchesRandom123KnownAnswers) {
  // Random123 kat_vectors, "philox4x32 10" lines: counter, key, expected output.
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       0xffffffff,
       0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       0xa4093822,
       0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Kat& k : kats) {
    Philox4 got = Philox4x32_10(k.ctr, k.k0, k.k1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], k.want.v[i]) << "word " << i;
  }
}

TEST(PhiloxTest, BlockLayoutIsSeedKeyAndIndexOffsetCounter) {
  const uint64_t seed = 0x299f31d0a4093822ull, offset = 0x0370734413198a2eull;
  const uint64_t q = 0x85a308d3243f6a88ull;
  Philox4 got = PhiloxBlock(seed, offset, q);
  EXPECT_EQ(got.v[0], 0xd16cfe09u);
  EXPECT_EQ(got.v[2], 0x5001e420u);
  EXPECT_EQ(got.v[3], 0x24126ea1u);
  // Element 4q + j is word j of block q.
  EXPECT_EQ(PhiloxUniform(seed, offset, 4 * 5 + 2),
            PhiloxToUniform01(PhiloxBlock(seed, offset, 5).v[2]));
}

TEST(PhiloxTest, FloatConversionsCoverTheirRangesExactly) {
  EXPECT_EQ(PhiloxToUniform01(0), 0.f);
  EXPECT_EQ(PhiloxToUniform01(0xffffffffu), 1.f - 0x1p-24f);
  EXPECT_EQ(PhiloxToUniformSym(0), -1.f);
  EXPECT_EQ(PhiloxToUniformSym(0x80000000u), 0.f);
  EXPECT_EQ(PhiloxToUniformSym(0xffffffffu), 1.f - 0x1p-23f);
}

TEST(PhiloxTest, FillIsUniformAndDependsOnSeedAndOffset) {
  constexpr int64_t kN = 1 << 16;
  std::vector<float> a(kN), b(kN), c(kN);
  TensorView va(a.data(), DType::kF32, {kN}), vb(b.data(), DType::kF32, {kN}),
      vc(c.data(), DType::kF32, {kN});
  ASSERT_TRUE(PhiloxUniformFill(va, -2.f, 2.f, 7, 0, nullptr).ok());
  ASSERT_TRUE(PhiloxUniformFill(vb, -2.f, 2.f, 7, 1, nullptr).ok());
  ASSERT_TRUE(PhiloxUniformFill(vc, -2.f, 2.f, 8, 0, nullptr).ok());
  double mean = 0, var = 0;
  int same_b = 0, same_c = 0;
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_GE(a[i], -2.f);
    ASSERT_LT(a[i], 2.f);
    mean += a[i];
    var += a[i] * a[i];
    same_b += a[i] == b[i];
    same_c += a[i] == c[i];
  }
  mean /= kN;
  var /= kN;
  // U(-2, 2): mean 0, variance 4/3. With 65536 samples the standard error of the mean is
  // sqrt(4/3 / 65536) = 0.0045, so 0.03 is > 6 sigma; the variance estimate is as tight.
  EXPECT_NEAR(mean, 0.0, 0.03);
  EXPECT_NEAR(var, 4.0 / 3.0, 0.03);
  EXPECT_LT(same_b, 10);
  EXPECT_LT(same_c, 10);
}

}  // namespace
}  // namespace tandem::kernels
