// CPU tests of MoeLayer against the float64 per-token definition (moe_testing.h): routed
// experts with and without renormalisation, the shared expert and its gate, top-k equal to
// the expert count, one expert taking every token, and the shape checks; each on the loop and
// on the padded layout (the expert-GEMM paths the CPU runs).
#include <gtest/gtest.h>

#include "kernels/moe/moe_layer.h"
#include "kernels/moe/moe_testing.h"

namespace tandem::kernels {
namespace {

// bf16 roundings of x's projections, the activations and the expert outputs: a few parts in
// 256 of the output's scale (the residual is O(1)).
constexpr double kAtol = 3e-2, kRtol = 1.0 / 64;

void CheckLayer(const MoeLayerShape& s, int64_t tokens, uint64_t seed, int64_t favourite = -1) {
  const testing::MoeProblem p = testing::RandomMoeProblem(s, tokens, seed, favourite);
  const std::vector<double> want = testing::MoeBlockRef(p);
  for (MoeExpertsPath path : {MoeExpertsPath::kLoop, MoeExpertsPath::kPadded}) {
    SCOPED_TRACE(MoeExpertsPathName(path));
    std::vector<int32_t> ids;
    const std::vector<bf16> got = testing::RunMoeLayer(HostAllocator(), nullptr, p, &ids, path);
    EXPECT_TRUE(testing::AllClose(testing::ToDouble(got), want, kAtol, kRtol, "hidden"));
    if (favourite >= 0) {
      for (int64_t t = 0; t < tokens; ++t) EXPECT_EQ(ids[t * s.top_k], favourite) << t;
    }
  }
}

TEST(MoeLayerTest, RoutedExperts) {
  CheckLayer({32, 8, 2, 12, 0, true}, 13, 1);
  CheckLayer({32, 8, 3, 12, 0, false}, 13, 2);
  CheckLayer({16, 5, 1, 6, 0, true}, 1, 3);  // one token
  CheckLayer({32, 4, 2, 12, 0, true}, 40, 7);  // rows enough for the padded layout
}

TEST(MoeLayerTest, SharedExpertWithSigmoidGate) { CheckLayer({32, 6, 2, 8, 20, true}, 9, 4); }

TEST(MoeLayerTest, TopKEqualsExpertCount) { CheckLayer({24, 4, 4, 8, 0, true}, 7, 5); }

TEST(MoeLayerTest, OneExpertTakesEveryToken) { CheckLayer({24, 6, 1, 8, 0, true}, 10, 6, 3); }

// precision = "fp8": the routed and shared experts in e4m3 against the float64 bf16
// definition. The router is the same bf16 GEMM, so the experts are the same; e4m3's 3
// mantissa bits put the expert outputs within ~5% of theirs (the residual is O(1)).
void CheckFp8Layer(MoeLayerShape s, int64_t tokens, uint64_t seed, int64_t favourite = -1) {
  s.fp8 = true;
  const testing::MoeProblem p = testing::RandomMoeProblem(s, tokens, seed, favourite);
  std::vector<int32_t> ids;
  const std::vector<bf16> got = testing::RunMoeLayer(HostAllocator(), nullptr, p, &ids);
  EXPECT_TRUE(testing::AllClose(testing::ToDouble(got), testing::MoeBlockRef(p), 8e-2, 1.0 / 32,
                                "fp8 hidden"));
  if (favourite >= 0) {
    for (int64_t t = 0; t < tokens; ++t) EXPECT_EQ(ids[t * s.top_k], favourite) << t;
  }
}

TEST(MoeLayerTest, Fp8RoutedAndSharedExperts) {
  CheckFp8Layer({160, 8, 2, 48, 40, true}, 13, 11);   // K not a multiple of 128
  CheckFp8Layer({160, 8, 3, 48, 0, false}, 1, 12);    // one token: most experts empty
  CheckFp8Layer({144, 4, 4, 32, 16, true}, 7, 13);    // top-k = E
  CheckFp8Layer({144, 6, 1, 32, 0, true}, 10, 14, 3);  // one expert takes every token
}

TEST(MoeLayerTest, Fp8NeedsFp8Weights) {
  MoeLayerShape s{32, 4, 2, 16, 0, true};
  s.fp8 = true;
  const testing::MoeProblem p = testing::RandomMoeProblem(s, 3, 1);
  std::vector<bf16> x = p.x, hidden = p.hidden, router = p.router;
  MoeLayerWeights w;
  w.router = TensorView(router.data(), DType::kBF16, {4, 32});
  auto layer = MoeLayer::Create(s, 3, HostAllocator(), nullptr).value();
  const Status st = layer->Forward(nullptr, w, TensorView(x.data(), DType::kBF16, {3, 32}),
                                   TensorView(hidden.data(), DType::kBF16, {3, 32}), nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("fp8"), std::string::npos) << st.message();
  MoeLayerShape b = s;
  b.fp8 = false;
  EXPECT_GT(MoeLayer::WorkspaceBytes(s, 64), MoeLayer::WorkspaceBytes(b, 64));
}

TEST(MoeLayerTest, PathRule) {
  // 4 experts of 10, 12, 0 and 9 rows: cap 16, 64 padded rows <= 31 + 15 + 64.
  const std::vector<int32_t> balanced = {0, 10, 22, 22, 31};
  EXPECT_EQ(MoeExpertCapacity(balanced), 16);
  EXPECT_EQ(MoeChooseExpertsPath(balanced), MoeExpertsPath::kPadded);
  // 64 experts, 2 rows each but one of 100: 64 * 112 padded rows > 226 + 113 + 64.
  std::vector<int32_t> skewed = {0};
  for (int e = 0; e < 64; ++e) skewed.push_back(skewed.back() + (e == 5 ? 100 : 2));
  EXPECT_EQ(MoeChooseExpertsPath(skewed), MoeExpertsPath::kGrouped);
  EXPECT_EQ(MoeChooseExpertsPath(std::vector<int32_t>{0, 0, 50, 50}), MoeExpertsPath::kLoop);
  EXPECT_EQ(MoeChooseExpertsPath(std::vector<int32_t>{0, 0, 0}), MoeExpertsPath::kLoop);
  // On the CPU the CUDA-only paths run the loop; kPadded only where the rule allows it.
  std::unique_ptr<MoeExperts> grouped =
      MoeExperts::Create(HostAllocator(), 64, MoeExpertsPath::kGrouped).value();
  EXPECT_EQ(grouped->Resolve(balanced), MoeExpertsPath::kLoop);
  std::unique_ptr<MoeExperts> padded =
      MoeExperts::Create(HostAllocator(), 64, MoeExpertsPath::kPadded).value();
  EXPECT_EQ(padded->Resolve(balanced), MoeExpertsPath::kPadded);
  EXPECT_EQ(padded->Resolve(skewed), MoeExpertsPath::kLoop);
}

TEST(MoeLayerTest, RejectsBadShapes) {
  const Status k_above = MoeLayer::CheckShape({16, 4, 5, 8, 0, true});
  ASSERT_FALSE(k_above.ok());
  EXPECT_NE(k_above.message().find("top-k 5"), std::string::npos) << k_above.message();
  EXPECT_FALSE(MoeLayer::CheckShape({16, 0, 1, 8, 0, true}).ok());
  EXPECT_FALSE(MoeLayer::CheckShape({16, 2000, 1, 8, 0, true}).ok());
  EXPECT_FALSE(MoeLayer::Create({16, 4, 2, 8, 0, true}, 0, HostAllocator(), nullptr).ok());
  EXPECT_GT(MoeLayer::WorkspaceBytes({16, 4, 2, 8, 4, true}, 10),
            MoeLayer::WorkspaceBytes({16, 4, 2, 8, 0, true}, 10));
}

}  // namespace
}  // namespace tandem::kernels
