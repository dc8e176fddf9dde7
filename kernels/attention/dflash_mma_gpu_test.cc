// The tensor-core DFlash block attention (DFlashPath::kMma) against the CPU reference
// (label gpu; run on the H200), plus the path selection: kAuto falls back to the SIMT kernels
// for shapes the MMA kernels lack, and kMma refuses them. Outputs are pre-filled with NaN so
// an unwritten element fails; failures name the worst element as (row, head, dim) with both
// values and the max error. Without CUDA this file is empty and the GPU main reports SKIPPED.
#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_cuda_testing.h"
#include "kernels/attention/attention_testing.h"
#include "kernels/attention/dflash_mma_internal.h"
#include "kernels/attention/dflash_path.h"

namespace tandem::kernels {
namespace {

using namespace attention_testing;
using attention_internal::DFlashAttentionBackwardPath;
using attention_internal::DFlashAttentionForwardPath;
using attention_internal::DFlashKernel;
using attention_internal::DFlashPath;

// Both kernel families run the sweep: kAuto now picks MMA for these shapes, so the SIMT
// kernels keep their coverage here.
class DFlashMmaCudaTest : public ::testing::TestWithParam<std::tuple<DFlashCase, DFlashPath>> {};

TEST_P(DFlashMmaCudaTest, ForwardAndBackwardMatchCpu) {
  const auto& [c, path] = GetParam();
  SCOPED_TRACE(fmt::format("{} {}", DFlashCaseName(c), path == DFlashPath::kMma ? "mma" : "simt"));
  CheckDFlashCase(c, path, 17);
}

// Context lengths cover empty ranges, partial 64-key tiles (odd lengths), several full
// tiles and window cuts; group sizes 1, 2, 3, 4 and 8 (one warp per query head).
INSTANTIATE_TEST_SUITE_P(
    Sweep, DFlashMmaCudaTest,
    ::testing::Combine(
        ::testing::Values(DFlashCase{{300}, 12, 4, 4, 128, 0, false},  // one long doc
                          DFlashCase{{300}, 12, 4, 4, 128, 64, true},  // window = tile
                          DFlashCase{{5, 1, 40, 1, 77, 9}, 20, 8, 2, 64, 0, false},  // many short
                          DFlashCase{{5, 1, 40, 1, 77, 9}, 20, 8, 2, 64, 16, true},
                          DFlashCase{{130, 70}, 9, 16, 4, 128, 1000, true},   // window > doc
                          DFlashCase{{33, 200}, 64, 8, 8, 128, 40, false},    // dense anchors
                          DFlashCase{{97}, 5, 6, 3, 64, 31, true},            // G 2, odd sizes
                          DFlashCase{{1, 1, 1}, 3, 12, 4, 64, 0, false},      // G 3, no context
                          DFlashCase{{700, 333}, 24, 32, 8, 128, 200, true},  // bench, scaled
                          DFlashCase{{700, 333}, 24, 32, 8, 128, 0, false},   // full layer
                          DFlashCase{{257, 129}, 16, 8, 1, 128, 65, true},    // G 8
                          DFlashCase{{513}, 10, 8, 1, 64, 0, true},           // G 8, d 64
                          DFlashCase{{200}, 12, 8, 2, 64, 7, true},      // window < block
                          DFlashCase{{200, 90}, 12, 8, 2, 128, 5, false},  // same, bidirectional
                          DFlashCase{{300}, 12, 4, 4, 128, 65, true}),   // W - 1 = tile
        ::testing::Values(DFlashPath::kMma, DFlashPath::kSimt)));

// The forward kernel gives one CTA several consecutive blocks (8 / G of them) sharing one key
// stream, so block order matters to it: the drafter's plan sorts anchors (ranges of
// neighbouring blocks nearly coincide; neighbours straddle document ends), while random and
// descending orders leave gaps and reversed ranges in one CTA. The shapes add what that
// grouping makes risky: nb not a multiple of the blocks per CTA (dead m-tiles), nb == 1,
// G == 1 (8 blocks per CTA, two own-key tiles), G == 3 (a warp spanning two blocks) and odd
// G 5 and 7 (a warp with one m-tile). Forward only; the sweep above runs the backward.
enum class AnchorOrder { kRandom, kSorted, kDescending };

void CheckForwardOrdered(const DFlashCase& c, AnchorOrder order, uint64_t seed) {
  DFlashLayout lay = MakeDFlashLayout(c.lens, c.nb, seed);
  if (order != AnchorOrder::kRandom) {
    std::vector<std::pair<int32_t, int32_t>> blocks;
    for (int b = 0; b < c.nb; ++b) blocks.emplace_back(lay.anchors[b], lay.doc_start[b]);
    std::sort(blocks.begin(), blocks.end());
    if (order == AnchorOrder::kDescending) std::reverse(blocks.begin(), blocks.end());
    for (int b = 0; b < c.nb; ++b) std::tie(lay.anchors[b], lay.doc_start[b]) = blocks[b];
  }
  const int64_t t = lay.t, rows = int64_t{c.nb} * kDFlashBlockSize;
  auto q = RandomBf16(rows * c.hq * c.d, seed + 1), kb = RandomBf16(rows * c.hk * c.d, seed + 2),
       vb = RandomBf16(rows * c.hk * c.d, seed + 3), kc = RandomBf16(t * c.hk * c.d, seed + 4),
       vc = RandomBf16(t * c.hk * c.d, seed + 5);
  const DFlashAttentionConfig cfg{c.window, c.causal, 0.0f};
  const Shape qs{rows, c.hq, c.d}, bs{rows, c.hk, c.d}, cs{t, c.hk, c.d}, ls{rows, c.hq};
  DFlashAttentionInputs hin{Host(q, qs),
                            Host(kb, bs),
                            Host(vb, bs),
                            Host(kc, cs),
                            Host(vc, cs),
                            Host(lay.anchors, {c.nb}),
                            Host(lay.doc_start, {c.nb})};
  std::vector<bf16> out(q.size());
  std::vector<float> lse(rows * c.hq);
  ASSERT_TRUE(DFlashAttentionForwardCpu(hin, cfg, Host(out, qs), Host(lse, ls)).ok());
  DevBuf<bf16> gq(q), gkb(kb), gvb(vb), gkc(kc), gvc(vc), gout(q.size());
  DevBuf<int32_t> ganc(lay.anchors), gds(lay.doc_start);
  DevBuf<float> glse(lse.size());
  const auto bf = DType::kBF16;
  DFlashAttentionInputs din{gq.View(bf, qs),
                            gkb.View(bf, bs),
                            gvb.View(bf, bs),
                            gkc.View(bf, cs),
                            gvc.View(bf, cs),
                            ganc.View(DType::kI32, {c.nb}),
                            gds.View(DType::kI32, {c.nb})};
  const Status s = DFlashAttentionForwardPath(DFlashPath::kMma, din, cfg, gout.View(bf, qs),
                                              glse.View(DType::kF32, ls), nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ExpectClose("out", ToFloat(gout.ToHost()), ToFloat(out), c.hq, c.d, kOutTol, kOutRtol);
  ExpectClose("lse", glse.ToHost(), lse, c.hq, 1, kLseTol, kLseTol);
}

// Shapes that stress how the CUDA kernels tile blocks, heads and keys: odd nb, nb 1, GQA
// groups 1 to 7 at d 64 and 128, long context ranges.
std::vector<DFlashCase> GroupingCases() {
  return {DFlashCase{{300, 200, 1, 150}, 33, 32, 8, 128, 64, true},  // G 4, odd nb
          DFlashCase{{300, 200, 1, 150}, 33, 32, 8, 128, 0, false},
          DFlashCase{{256}, 1, 8, 2, 128, 0, false},         // nb 1
          DFlashCase{{90, 90, 90}, 21, 8, 8, 64, 0, true},   // G 1
          DFlashCase{{64, 64}, 6, 4, 2, 64, 0, false},       // G 2
          DFlashCase{{500}, 13, 12, 4, 128, 100, true},      // G 3
          DFlashCase{{120, 40}, 7, 10, 2, 64, 50, false},    // G 5
          DFlashCase{{500}, 11, 12, 2, 128, 0, false},       // G 6
          DFlashCase{{120, 40, 3}, 9, 14, 2, 128, 0, true},  // G 7
          DFlashCase{{2000}, 40, 32, 8, 128, 700, true}};    // long ranges
}

class DFlashMmaOrderTest : public ::testing::TestWithParam<std::tuple<DFlashCase, AnchorOrder>> {};

TEST_P(DFlashMmaOrderTest, ForwardMatchesCpu) {
  const auto& [c, order] = GetParam();
  SCOPED_TRACE(fmt::format("{} order {}", DFlashCaseName(c), static_cast<int>(order)));
  CheckForwardOrdered(c, order, 29);
}

INSTANTIATE_TEST_SUITE_P(
    Grouping, DFlashMmaOrderTest,
    ::testing::Combine(
        ::testing::ValuesIn(GroupingCases()),
        ::testing::Values(AnchorOrder::kRandom, AnchorOrder::kSorted, AnchorOrder::kDescending)));

// The split backward (delta scratch: query-major kernel + key-major context kernel) on
// shapes that stress how CUDA kernels tile blocks, heads and keys, with MakeDFlashLayout's
// random anchors (neighbouring blocks in different documents, gaps, reversed order): odd nb,
// nb 1, G 1, 2, 3, 5, 6, 7 and 8 at d 64, long ranges. CheckDFlashCase also checks that the
// context gradients are bitwise repeatable.
class DFlashMmaSplitGroupingTest : public ::testing::TestWithParam<DFlashCase> {};

TEST_P(DFlashMmaSplitGroupingTest, ForwardAndBackwardMatchCpu) {
  SCOPED_TRACE(DFlashCaseName(GetParam()));
  CheckDFlashCase(GetParam(), DFlashPath::kMma, 31, /*split=*/true);
}

INSTANTIATE_TEST_SUITE_P(
    Grouping, DFlashMmaSplitGroupingTest,
    ::testing::ValuesIn([] {
      std::vector<DFlashCase> cases = GroupingCases();
      cases.push_back(DFlashCase{{513}, 10, 8, 1, 64, 0, true});  // G 8, d 64
      return cases;
    }()));

// The wgmma context kernel (dflash_wgmma_ctx.cu, selected for d = 128) on shapes that stress
// its tiling: contexts ending inside the first or the second 64-key warpgroup of a 128-key
// tile (t = 37, 100, 129, 255), windows cutting inside a warpgroup, groups 1, 2, 3, 5 and 6
// (padded query heads in an item), 8 (two items per block), and more blocks seeing one tile
// than one pass of the block list holds (1100 > kCtxListCap). Bitwise repeatability is
// checked by CheckDFlashCase.
class DFlashWgmmaCtxTest : public ::testing::TestWithParam<DFlashCase> {};

TEST_P(DFlashWgmmaCtxTest, SplitBackwardMatchesCpu) {
  const DFlashCase& c = GetParam();
  ASSERT_EQ(PlanOnThisDevice(DFlashPath::kMma, c.hq, c.hk, c.d).context_backward,
            DFlashKernel::kWgmma);
  SCOPED_TRACE(DFlashCaseName(GetParam()));
  CheckDFlashCase(GetParam(), DFlashPath::kMma, 41, /*split=*/true);
}

INSTANTIATE_TEST_SUITE_P(
    Tiling, DFlashWgmmaCtxTest,
    ::testing::Values(DFlashCase{{37}, 5, 4, 1, 128, 0, true},            // t < 64, G 4
                      DFlashCase{{100}, 7, 8, 2, 128, 0, false},          // ends in warpgroup 1
                      DFlashCase{{129}, 9, 4, 4, 128, 70, true},          // a key past a tile, G 1
                      DFlashCase{{255, 1, 3}, 30, 16, 2, 128, 90, true},  // G 8, windows
                      DFlashCase{{60, 195}, 17, 3, 3, 128, 0, true},      // G 1
                      DFlashCase{{300, 41}, 13, 10, 2, 128, 33, false},   // G 5
                      DFlashCase{{200, 77}, 11, 6, 3, 128, 64, true},     // G 2, W = warpgroup
                      DFlashCase{{517}, 19, 12, 2, 128, 129, true},       // G 6
                      DFlashCase{{150}, 8, 6, 2, 128, 0, false},          // G 3
                      DFlashCase{{100}, 1100, 1, 1, 128, 0, true}));      // list over 1024

// d = 64 keeps the mma.sync context kernel, and DFlashPath::kMmaSync sends d = 128 there too;
// both still match the CPU. A context over DFlashWgmmaCtxRanked's limit runs the wgmma kernel
// with its tiles in grid order (here 547 tiles, most of them seen by no block: their rows are
// written as zeros).
TEST(DFlashWgmmaCtxChoiceTest, OtherContextKernelsStayCorrect) {
  EXPECT_EQ(PlanOnThisDevice(DFlashPath::kMma, 8, 2, 64).context_backward, DFlashKernel::kMmaSync);
  CheckDFlashCase(DFlashCase{{130, 70}, 9, 8, 2, 64, 40, true}, DFlashPath::kMma, 43, true);
  EXPECT_EQ(PlanOnThisDevice(DFlashPath::kMmaSync, 8, 2, 128).context_backward,
            DFlashKernel::kMmaSync);
  CheckDFlashCase(DFlashCase{{300, 41}, 13, 8, 2, 128, 33, true}, DFlashPath::kMmaSync, 47, true);
  static_assert(attention_internal::DFlashWgmmaCtxRanked(65408) &&
                !attention_internal::DFlashWgmmaCtxRanked(70000));
  EXPECT_EQ(PlanOnThisDevice(DFlashPath::kMma, 4, 1, 128).context_backward, DFlashKernel::kWgmma);
  CheckDFlashCase(DFlashCase{{70000}, 9, 4, 1, 128, 64, true}, DFlashPath::kMma, 49, true);
}

// kMma refuses what it lacks (head_dim 256, GQA group 12); kAuto still runs those shapes on
// the SIMT kernels and matches the CPU forward.
TEST(DFlashMmaPathTest, UnsupportedShapesFallBack) {
  struct Shape2 {
    int hq, hk, d;
  };
  for (const Shape2 sh : {Shape2{2, 1, 256}, Shape2{12, 1, 64}}) {
    SCOPED_TRACE(fmt::format("h{}/{} d{}", sh.hq, sh.hk, sh.d));
    DFlashLayout lay = MakeDFlashLayout({50, 30}, 4, 3);
    const int64_t t = lay.t, rows = 4 * kDFlashBlockSize;
    auto q = RandomBf16(rows * sh.hq * sh.d, 31), kb = RandomBf16(rows * sh.hk * sh.d, 32),
         vb = RandomBf16(rows * sh.hk * sh.d, 33), kc = RandomBf16(t * sh.hk * sh.d, 34),
         vc = RandomBf16(t * sh.hk * sh.d, 35);
    const Shape qs{rows, sh.hq, sh.d}, bs{rows, sh.hk, sh.d}, cs{t, sh.hk, sh.d}, ls{rows, sh.hq};
    const DFlashAttentionConfig cfg{20, true, 0.0f};
    DFlashAttentionInputs hin{Host(q, qs),
                              Host(kb, bs),
                              Host(vb, bs),
                              Host(kc, cs),
                              Host(vc, cs),
                              Host(lay.anchors, {4}),
                              Host(lay.doc_start, {4})};
    std::vector<bf16> out(q.size());
    std::vector<float> lse(rows * sh.hq);
    ASSERT_TRUE(DFlashAttentionForwardCpu(hin, cfg, Host(out, qs), Host(lse, ls)).ok());
    DevBuf<bf16> gq(q), gkb(kb), gvb(vb), gkc(kc), gvc(vc), gout(q.size());
    DevBuf<int32_t> ganc(lay.anchors), gds(lay.doc_start);
    DevBuf<float> glse(lse.size());
    const auto bf = DType::kBF16;
    DFlashAttentionInputs din{gq.View(bf, qs),           gkb.View(bf, bs),
                              gvb.View(bf, bs),          gkc.View(bf, cs),
                              gvc.View(bf, cs),          ganc.View(DType::kI32, {4}),
                              gds.View(DType::kI32, {4})};
    const TensorView o = gout.View(bf, qs), l = glse.View(DType::kF32, ls);
    EXPECT_EQ(DFlashAttentionForwardPath(DFlashPath::kMma, din, cfg, o, l, nullptr).code(),
              StatusCode::kInvalidArgument);
    Status s = DFlashAttentionForwardPath(DFlashPath::kAuto, din, cfg, o, l, nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ExpectClose("out", ToFloat(gout.ToHost()), ToFloat(out), sh.hq, sh.d, kOutTol, kOutRtol);
    ExpectClose("lse", glse.ToHost(), lse, sh.hq, 1, kLseTol, kLseTol);
  }
}

}  // namespace
}  // namespace tandem::kernels
#endif  // TANDEM_HAVE_CUDA
