// GPU tests of the selector ops: CUDA against the CPU version (selector_cpu.cc, itself
// tested against float64 in selector_test.cc) on the odd shapes plus model-like ones
// (Rk = 256 takes the bf16x8 path, k = 64, enough rows for the multi-CTA loss), and repeated
// calls bitwise equal where selector.h claims determinism.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "kernels/dflash2/selector.h"
#include "kernels/dflash2/selector_test_util.h"
#include "kernels/testing/gpu.h"

namespace tandem::kernels::dflash2 {
namespace {

using testing::AllClose;
using testing::ToDevice;
using testing::ToHost;

std::vector<SelectorCase> GpuCases() {
  std::vector<SelectorCase> c = SelectorTestCases();
  c.push_back({.R = 300, .k = 64, .Rk = 256, .V = 1000});
  c.push_back({.R = 1000, .k = 16, .Rk = 256, .V = 500, .bf16_proj = true});
  c.push_back({.R = 129, .k = 33, .Rk = 40, .V = 77});
  return c;
}

// The problem's inputs on the device.
struct DeviceProblem {
  Tensor proj, pred, succ, prev, ids, unary, targets, weights;
  explicit DeviceProblem(const SelectorProblem& p)
      : proj(p.bf16_proj ? ToDevice(p.proj_b, DType::kBF16, {p.R, p.Rk})
                         : ToDevice(p.proj_f, DType::kF32, {p.R, p.Rk})),
        pred(ToDevice(p.pred, DType::kBF16, {p.V, p.Rk})),
        succ(ToDevice(p.succ, DType::kBF16, {p.V, p.Rk})),
        prev(ToDevice(p.prev, DType::kI32, {p.R})),
        ids(ToDevice(p.ids, DType::kI32, {p.R, p.k})),
        unary(ToDevice(p.unary, DType::kF32, {p.R, p.k})),
        targets(ToDevice(p.targets, DType::kI32, {p.R})),
        weights(ToDevice(p.weights, DType::kF32, {p.R})) {}
};

Tensor Empty(DType dt, Shape shape) { return Tensor::Empty(testing::Pool(), dt, shape).value(); }

class SelectorGpuTest : public ::testing::TestWithParam<SelectorCase> {};

TEST_P(SelectorGpuTest, ScoresAndLossMatchCpu) {
  const SelectorProblem p = MakeSelectorProblem(GetParam(), 101);
  const DeviceProblem g(p);
  std::vector<float> scores(p.rk()), dscores(p.rk()), loss(1);
  std::vector<int32_t> stats(2);
  ASSERT_TRUE(cpu::SelectorScoresForward(p.View(scores, {p.R, p.k}), p.ProjView(), p.PredView(),
                                         p.SuccView(), p.View(p.prev, {p.R}),
                                         p.View(p.ids, {p.R, p.k}), p.View(p.unary, {p.R, p.k}),
                                         nullptr)
                  .ok());
  ASSERT_TRUE(cpu::SelectorLoss(p.View(loss, {1}), p.View(stats, {2}), p.View(dscores, {p.R, p.k}),
                                p.View(scores, {p.R, p.k}), p.View(p.ids, {p.R, p.k}),
                                p.View(p.targets, {p.R}), p.View(p.weights, {p.R}), 0.5f, nullptr)
                  .ok());
  Tensor gs = Empty(DType::kF32, {p.R, p.k}), gds = Empty(DType::kF32, {p.R, p.k});
  Tensor gl = Empty(DType::kF32, {1}), gst = Empty(DType::kI32, {2});
  std::vector<float> first_scores, first_ds;
  for (int call = 0; call < 2; ++call) {
    ASSERT_TRUE(SelectorScoresForward(gs, g.proj, g.pred, g.succ, g.prev, g.ids, g.unary, nullptr)
                    .ok());
    // The loss reads the CPU scores so that both losses see the same input.
    Tensor cs = ToDevice(scores, DType::kF32, {p.R, p.k});
    ASSERT_TRUE(SelectorLoss(gl, gst, gds, cs, g.ids, g.targets, g.weights, 0.5f, nullptr).ok());
    const std::vector<float> hs = ToHost<float>(gs), hds = ToHost<float>(gds);
    if (call == 0) {
      // fp32 dots of Rk terms of size <= ~3.4 in another order.
      EXPECT_TRUE(AllClose(hs, scores, 1e-6 * p.Rk, 1e-5, "scores"));
      EXPECT_TRUE(AllClose(hds, dscores, 1e-7, 1e-5, "dscores"));
      EXPECT_NEAR(ToHost<float>(gl)[0], loss[0], 1e-5 * (1 + loss[0]));
      EXPECT_EQ(ToHost<int32_t>(gst), stats);
      first_scores = hs, first_ds = hds;
    } else {
      EXPECT_EQ(hs, first_scores) << "forward not deterministic";
      EXPECT_EQ(hds, first_ds) << "loss gradient not deterministic";
    }
  }
}

TEST_P(SelectorGpuTest, BackwardMatchesCpu) {
  const SelectorProblem p = MakeSelectorProblem(GetParam(), 102);
  const DeviceProblem g(p);
  std::vector<float> ds = testing::RandomFloats(p.rk(), 103);
  for (int64_t i = 0; i < p.rk(); i += 3) ds[i] = 0.f;  // skipped candidates
  std::vector<float> dproj(p.R * p.Rk), dpred(p.V * p.Rk, 0.5f), dsucc(p.V * p.Rk, 0.5f);
  ASSERT_TRUE(cpu::SelectorScoresBackward(
                  p.View(dproj, {p.R, p.Rk}), p.View(dpred, {p.V, p.Rk}),
                  p.View(dsucc, {p.V, p.Rk}), p.View(ds, {p.R, p.k}), p.ProjView(), p.PredView(),
                  p.SuccView(), p.View(p.prev, {p.R}), p.View(p.ids, {p.R, p.k}), nullptr)
                  .ok());
  for (DType dproj_type : {DType::kF32, DType::kBF16}) {
    Tensor gdproj = Empty(dproj_type, {p.R, p.Rk});
    Tensor gdpred = ToDevice(std::vector<float>(p.V * p.Rk, 0.5f), DType::kF32, {p.V, p.Rk});
    Tensor gdsucc = ToDevice(std::vector<float>(p.V * p.Rk, 0.5f), DType::kF32, {p.V, p.Rk});
    Tensor gds = ToDevice(ds, DType::kF32, {p.R, p.k});
    ASSERT_TRUE(SelectorScoresBackward(gdproj, gdpred, gdsucc, gds, g.proj, g.pred, g.succ, g.prev,
                                       g.ids, nullptr)
                    .ok());
    if (dproj_type == DType::kF32) {
      EXPECT_TRUE(AllClose(ToHost<float>(gdproj), dproj, 1e-6 * p.k, 1e-5, "dproj"));
    } else {
      EXPECT_TRUE(AllClose(testing::ToFloat(ToHost<bf16>(gdproj)), dproj, 1e-5,
                           testing::kOneBf16UlpRtol, "dproj bf16"));
    }
    // Sums of up to R * k terms of size ~2, in another (atomic) order.
    const double atol = 1e-6 * p.R * p.k;
    EXPECT_TRUE(AllClose(ToHost<float>(gdpred), dpred, atol, 1e-5, "dpred"));
    EXPECT_TRUE(AllClose(ToHost<float>(gdsucc), dsucc, atol, 1e-5, "dsucc"));
    // dproj is deterministic.
    const std::vector<uint8_t> once = ToHost<uint8_t>(gdproj);
    ASSERT_TRUE(SelectorScoresBackward(gdproj, gdpred, gdsucc, gds, g.proj, g.pred, g.succ, g.prev,
                                       g.ids, nullptr)
                    .ok());
    EXPECT_EQ(ToHost<uint8_t>(gdproj), once) << "dproj not deterministic";
  }
}

TEST_P(SelectorGpuTest, WalksMatchCpu) {
  const SelectorProblem p = MakeSelectorProblem(GetParam(), 104);
  const DeviceProblem g(p);
  for (int64_t block_rows : {int64_t{1}, p.R}) {
    const int64_t nb = p.R / block_rows;
    std::vector<int32_t> anchors(nb), path(p.R);
    for (int64_t b = 0; b < nb; ++b) anchors[b] = static_cast<int32_t>((b * 7 + 2) % p.V);
    if (nb > 1) anchors[1] = -1;  // no pair term on that block's first row
    ASSERT_TRUE(cpu::SelectorGreedyWalk(p.View(path, {p.R}), p.ProjView(), p.PredView(),
                                        p.SuccView(), p.View(p.ids, {p.R, p.k}),
                                        p.View(p.unary, {p.R, p.k}), p.View(anchors, {nb}),
                                        block_rows, nullptr)
                    .ok());
    Tensor ganchors = ToDevice(anchors, DType::kI32, {nb}), gpath = Empty(DType::kI32, {p.R});
    ASSERT_TRUE(SelectorGreedyWalk(gpath, g.proj, g.pred, g.succ, g.ids, g.unary, ganchors,
                                   block_rows, nullptr)
                    .ok());
    EXPECT_EQ(ToHost<int32_t>(gpath), path) << "greedy, block_rows " << block_rows;

    Tensor gprobs = Empty(DType::kF32, {p.R, p.k});
    ASSERT_TRUE(SelectorSampleWalk(gpath, gprobs, g.proj, g.pred, g.succ, g.ids, g.unary,
                                   ganchors, block_rows, 0.8f, 9, 3, nullptr)
                    .ok());
    const std::vector<int32_t> spath = ToHost<int32_t>(gpath);
    const std::vector<float> sprobs = ToHost<float>(gprobs);
    ExpectSampleConsistent(p, anchors, block_rows, 0.8f, 9, 3, spath, sprobs, 1e-5);
    ASSERT_TRUE(SelectorSampleWalk(gpath, gprobs, g.proj, g.pred, g.succ, g.ids, g.unary,
                                   ganchors, block_rows, 0.8f, 9, 3, nullptr)
                    .ok());
    EXPECT_EQ(ToHost<int32_t>(gpath), spath) << "sampling not deterministic";
    EXPECT_EQ(ToHost<float>(gprobs), sprobs);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, SelectorGpuTest, ::testing::ValuesIn(GpuCases()));

TEST(SelectorGpuHeadTest, CandidateHeadBackwardMatchesCpu) {
  using Shape4 = std::tuple<int64_t, int64_t, int64_t, int64_t>;  // R, k, H, V
  for (const auto& [R, K, H, V] :
       std::vector<Shape4>{{7, 3, 13, 11}, {33, 64, 4096, 300}, {129, 16, 1000, 64}}) {
    const SelectorProblem src = MakeSelectorProblem({.R = R, .k = K, .Rk = 1, .V = V}, 105);
    const std::vector<bf16> head = testing::RandomBf16(V * H, 106);
    std::vector<float> dunary = testing::RandomFloats(R * K, 107);
    for (int64_t i = 0; i < R * K; i += 4) dunary[i] = 0.f;
    const std::vector<float> values = testing::RandomFloats(R * K, 108, -2.5f, 2.5f);
    const std::vector<bf16> dh0 = testing::RandomBf16(R * H, 109);
    for (const auto& [mult, cap] : {std::pair{1.f, 0.f}, std::pair{2.f, 3.f}}) {
      std::vector<bf16> dh(dh0);
      ASSERT_TRUE(cpu::CandidateHeadBackward(
                      TensorView(dh.data(), DType::kBF16, {R, H}), src.View(dunary, {R, K}),
                      src.View(values, {R, K}), src.View(src.ids, {R, K}),
                      src.View(head, {V, H}), mult, cap, nullptr)
                      .ok());
      Tensor gdh = ToDevice(dh0, DType::kBF16, {R, H});
      Tensor gdu = ToDevice(dunary, DType::kF32, {R, K}), gv = ToDevice(values, DType::kF32, {R, K});
      Tensor gids = ToDevice(src.ids, DType::kI32, {R, K}), gw = ToDevice(head, DType::kBF16, {V, H});
      ASSERT_TRUE(CandidateHeadBackward(gdh, gdu, gv, gids, gw, mult, cap, nullptr).ok());
      // fp32 sums of k terms in the same slot order; may still round to the neighbouring bf16.
      EXPECT_TRUE(AllClose(ToHost<bf16>(gdh), dh, 1e-5, testing::kOneBf16UlpRtol, "dhidden"))
          << "R " << R << " H " << H << " softcap " << cap;
      Tensor again = ToDevice(dh0, DType::kBF16, {R, H});
      ASSERT_TRUE(CandidateHeadBackward(again, gdu, gv, gids, gw, mult, cap, nullptr).ok());
      EXPECT_TRUE(testing::BitEqual(ToHost<bf16>(again), ToHost<bf16>(gdh)));
    }
  }
}

}  // namespace
}  // namespace tandem::kernels::dflash2
