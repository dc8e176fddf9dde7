// CPU tests of MoeLayer against the float64 per-token definition (moe_testing.h): routed
// experts with and without renormalisation, the shared expert and its gate, top-k equal to
// the expert count, one expert taking every token, and the shape checks.
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
  std::vector<int32_t> ids;
  const std::vector<bf16> got = testing::RunMoeLayer(HostAllocator(), nullptr, p, &ids);
  EXPECT_TRUE(testing::AllClose(testing::ToDouble(got), testing::MoeBlockRef(p), kAtol, kRtol,
                                "hidden"));
  if (favourite >= 0) {
    for (int64_t t = 0; t < tokens; ++t) EXPECT_EQ(ids[t * s.top_k], favourite) << t;
  }
}

TEST(MoeLayerTest, RoutedExperts) {
  CheckLayer({32, 8, 2, 12, 0, true}, 13, 1);
  CheckLayer({32, 8, 3, 12, 0, false}, 13, 2);
  CheckLayer({16, 5, 1, 6, 0, true}, 1, 3);  // one token
}

TEST(MoeLayerTest, SharedExpertWithSigmoidGate) { CheckLayer({32, 6, 2, 8, 20, true}, 9, 4); }

TEST(MoeLayerTest, TopKEqualsExpertCount) { CheckLayer({24, 4, 4, 8, 0, true}, 7, 5); }

TEST(MoeLayerTest, OneExpertTakesEveryToken) { CheckLayer({24, 6, 1, 8, 0, true}, 10, 6, 3); }

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
