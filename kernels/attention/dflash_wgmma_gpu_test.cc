// The query-major kernels on Hopper warpgroup MMA (GQA group 4, head_dim 64 or 128), the
// forward (dflash_wgmma_fwd.cu) and the split backward (dflash_wgmma_bwd.cu), against the CPU
// reference (label gpu; run on the H200): odd shapes (partial and empty context tiles, ranges
// of many tiles so the 2-stage rings wrap, window cuts, odd nb, causal or not), their outputs
// bitwise repeatable run to run, and the shapes they refuse (other groups and head dims)
// refused by their launchers and run by the mma.sync kernels through the same entry point, as
// group 4 is with DFlashPath::kMmaSync.
// Without CUDA this file is empty and the GPU main reports SKIPPED.
#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_cuda_testing.h"
#include "kernels/attention/attention_testing.h"
#include "kernels/attention/dflash_path.h"
#include "kernels/attention/dflash_wgmma_internal.h"

namespace tandem::kernels {
namespace {

using namespace attention_testing;
using attention_internal::DFlashKernel;
using attention_internal::DFlashPath;
using attention_internal::DFlashWgmmaQuerySupported;

static_assert(DFlashWgmmaQuerySupported(4, 128) && DFlashWgmmaQuerySupported(4, 64));
static_assert(!DFlashWgmmaQuerySupported(2, 128) && !DFlashWgmmaQuerySupported(8, 128) &&
              !DFlashWgmmaQuerySupported(4, 256) && !DFlashWgmmaQuerySupported(1, 64));

// Runs the forward of case `c` (inputs from `seed`; anchors `sorted` as the drafter's plan
// makes them, else random) twice through `path` on fresh NaN-poisoned outputs: the first run
// must match the CPU reference, the second repeat it bitwise (no atomics, a fixed summation
// order).
void CheckForwardRepeats(const DFlashCase& c, uint64_t seed, bool sorted, DFlashPath path) {
  DFlashLayout lay = MakeDFlashLayout(c.lens, c.nb, seed);
  if (sorted) {
    std::vector<std::pair<int32_t, int32_t>> blocks;
    for (int b = 0; b < c.nb; ++b) blocks.emplace_back(lay.anchors[b], lay.doc_start[b]);
    std::sort(blocks.begin(), blocks.end());
    for (int b = 0; b < c.nb; ++b) std::tie(lay.anchors[b], lay.doc_start[b]) = blocks[b];
  }
  const int64_t t = lay.t, rows = int64_t{c.nb} * kDFlashBlockSize;
  auto q = RandomBf16(rows * c.hq * c.d, seed + 1), kb = RandomBf16(rows * c.hk * c.d, seed + 2),
       vb = RandomBf16(rows * c.hk * c.d, seed + 3), kc = RandomBf16(t * c.hk * c.d, seed + 4),
       vc = RandomBf16(t * c.hk * c.d, seed + 5);
  std::vector<int32_t> anchors = lay.anchors, doc_start = lay.doc_start;
  const DFlashAttentionConfig cfg{c.window, c.causal, 0.0f};
  const Shape qs{rows, c.hq, c.d}, bs{rows, c.hk, c.d}, cs{t, c.hk, c.d}, ls{rows, c.hq};
  DFlashAttentionInputs hin{Host(q, qs),  Host(kb, bs), Host(vb, bs),
                            Host(kc, cs), Host(vc, cs), Host(anchors, {c.nb}),
                            Host(doc_start, {c.nb})};
  std::vector<bf16> out(q.size());
  std::vector<float> lse(rows * c.hq);
  ASSERT_TRUE(DFlashAttentionForwardCpu(hin, cfg, Host(out, qs), Host(lse, ls)).ok());
  const auto bf = DType::kBF16;
  DevBuf<bf16> gq(q), gkb(kb), gvb(vb), gkc(kc), gvc(vc);
  DevBuf<int32_t> ganc(anchors), gds(doc_start);
  DFlashAttentionInputs din{gq.View(bf, qs),  gkb.View(bf, bs), gvb.View(bf, bs),
                            gkc.View(bf, cs), gvc.View(bf, cs), ganc.View(DType::kI32, {c.nb}),
                            gds.View(DType::kI32, {c.nb})};
  DevBuf<bf16> gout(q.size()), gout2(q.size());
  DevBuf<float> glse(lse.size()), glse2(lse.size());
  auto run = [&](DevBuf<bf16>& o, DevBuf<float>& l) {
    return attention_internal::DFlashAttentionForwardPath(path, din, cfg, o.View(bf, qs),
                                                          l.View(DType::kF32, ls), nullptr);
  };
  Status s = run(gout, glse);
  ASSERT_TRUE(s.ok()) << s.ToString();
  s = run(gout2, glse2);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ExpectClose("out", ToFloat(gout.ToHost()), ToFloat(out), c.hq, c.d, kOutTol, kOutRtol);
  ExpectClose("lse", glse.ToHost(), lse, c.hq, 1, kLseTol, kLseTol);
  auto same = [](const auto& x, const auto& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) == 0;
  };
  EXPECT_TRUE(same(gout.ToHost(), gout2.ToHost())) << "out differs between two runs";
  EXPECT_TRUE(same(glse.ToHost(), glse2.ToHost())) << "lse differs between two runs";
}

// The warpgroup forward on group 4 (the library is built for sm_90a only, so the device is a
// Hopper), anchors random (two blocks' ranges in different documents) and sorted (ranges that
// overlap): context lengths t = 37, 100, 129, 255 (partial last tiles, a range under one
// tile), no context at all, odd nb, and ranges of many tiles (both rings wrap), d 64 and 128.
class DFlashWgmmaForwardTest : public ::testing::TestWithParam<DFlashCase> {};

TEST_P(DFlashWgmmaForwardTest, MatchesCpuAndRepeatsBitwise) {
  const DFlashCase& c = GetParam();
  SCOPED_TRACE(DFlashCaseName(c));
  ASSERT_EQ(PlanOnThisDevice(DFlashPath::kMma, c.hq, c.hk, c.d).forward, DFlashKernel::kWgmma);
  for (const bool sorted : {false, true}) {
    SCOPED_TRACE(sorted ? "sorted anchors" : "random anchors");
    CheckForwardRepeats(c, 51, sorted, DFlashPath::kMma);
  }
}

// The public entry point's choice (kAuto) runs the warpgroup kernel too.
TEST(DFlashWgmmaForwardDefaultTest, AutoPicksTheWarpgroupKernel) {
  EXPECT_EQ(PlanOnThisDevice(DFlashPath::kAuto, 32, 8, 128).forward, DFlashKernel::kWgmma);
  EXPECT_EQ(PlanOnThisDevice(DFlashPath::kAuto, 8, 2, 64).forward, DFlashKernel::kWgmma);
  CheckForwardRepeats(DFlashCase{{200, 55}, 13, 32, 8, 128, 100, true}, 57, true,
                      DFlashPath::kAuto);
}

INSTANTIATE_TEST_SUITE_P(
    Group4, DFlashWgmmaForwardTest,
    ::testing::Values(DFlashCase{{37}, 5, 8, 2, 64, 0, true},          // t 37
                      DFlashCase{{37}, 6, 4, 1, 128, 20, false},       // window < range
                      DFlashCase{{60, 40}, 9, 16, 4, 128, 31, false},  // t 100
                      DFlashCase{{60, 40}, 9, 16, 4, 64, 0, true},
                      DFlashCase{{129}, 7, 4, 1, 128, 65, true},        // t 129, W - 1 = tile
                      DFlashCase{{200, 55}, 13, 32, 8, 64, 100, true},  // t 255
                      DFlashCase{{200, 55}, 13, 32, 8, 128, 0, false},
                      DFlashCase{{1, 1, 1}, 3, 8, 2, 128, 0, true},        // no context
                      DFlashCase{{2000, 300}, 40, 32, 8, 128, 700, true},  // many tiles
                      DFlashCase{{2000}, 17, 8, 2, 64, 2048, false}));

// Groups the warpgroup forward refuses, and group 4 under DFlashPath::kMmaSync, run the
// mma.sync forward through the same entry point and still match the CPU, bitwise repeatably.
class DFlashWgmmaForwardFallbackTest : public ::testing::TestWithParam<DFlashCase> {};

TEST_P(DFlashWgmmaForwardFallbackTest, MmaSyncForwardMatchesCpu) {
  const DFlashCase& c = GetParam();
  SCOPED_TRACE(DFlashCaseName(c));
  const DFlashPath path = c.hq == 4 * c.hk ? DFlashPath::kMmaSync : DFlashPath::kMma;
  EXPECT_EQ(PlanOnThisDevice(path, c.hq, c.hk, c.d).forward, DFlashKernel::kMmaSync);
  CheckForwardRepeats(c, 53, /*sorted=*/false, path);
}

INSTANTIATE_TEST_SUITE_P(
    OtherGroups, DFlashWgmmaForwardFallbackTest,
    ::testing::Values(DFlashCase{{37}, 5, 4, 4, 128, 0, true},           // G 1
                      DFlashCase{{60, 40}, 9, 16, 8, 64, 31, false},     // G 2
                      DFlashCase{{129}, 7, 12, 4, 128, 65, true},        // G 3
                      DFlashCase{{200, 55}, 13, 10, 2, 64, 100, true},   // G 5
                      DFlashCase{{255}, 11, 12, 2, 128, 0, false},       // G 6
                      DFlashCase{{120, 40, 3}, 9, 14, 2, 128, 0, true},  // G 7
                      DFlashCase{{257, 129}, 16, 8, 1, 64, 65, true},    // G 8
                      DFlashCase{{200, 55}, 13, 32, 8, 128, 100, true},  // G 4, kMmaSync
                      DFlashCase{{37}, 5, 8, 2, 64, 0, true}));          // G 4 d 64, kMmaSync

// The forward launcher refuses what it lacks instead of running it: group != 4, head_dim 256,
// and a scale <= 0 (it takes the row max of unscaled scores). Nothing is launched, so the
// null tensors are never read.
TEST(DFlashWgmmaRefusalTest, ForwardLauncherRefusesUnsupportedShapes) {
  struct Shape3 {
    int hq, hk, d;
    float scale;
  };
  for (const Shape3 sh :
       {Shape3{8, 4, 128, 1.0f}, Shape3{16, 2, 64, 1.0f}, Shape3{32, 8, 256, 1.0f},
        Shape3{6, 2, 64, 1.0f}, Shape3{4, 4, 128, 1.0f}, Shape3{32, 8, 128, -0.5f}}) {
    SCOPED_TRACE(fmt::format("h{}/{} d{} scale {}", sh.hq, sh.hk, sh.d, sh.scale));
    EXPECT_NE(PlanOnThisDevice(DFlashPath::kMma, sh.hq, sh.hk, sh.d, sh.scale).forward,
              DFlashKernel::kWgmma);
    attention_internal::DFlashKernelParams p{};
    p.nb = 1;
    p.hq = sh.hq;
    p.hk = sh.hk;
    p.d = sh.d;
    p.scale = sh.scale;
    EXPECT_EQ(attention_internal::LaunchDFlashWgmmaForward(p, nullptr), cudaErrorInvalidValue);
  }
}

class DFlashWgmmaSplitTest : public ::testing::TestWithParam<DFlashCase> {};

// CheckDFlashCase also checks the context gradients bitwise repeatable.
TEST_P(DFlashWgmmaSplitTest, ForwardAndBackwardMatchCpu) {
  SCOPED_TRACE(DFlashCaseName(GetParam()));
  CheckDFlashCase(GetParam(), DFlashPath::kMma, 41, /*split=*/true);
}

INSTANTIATE_TEST_SUITE_P(
    Group4, DFlashWgmmaSplitTest,
    ::testing::Values(DFlashCase{{300, 200, 1, 150}, 33, 32, 8, 128, 64, true},  // odd nb
                      DFlashCase{{300, 200, 1, 150}, 33, 32, 8, 128, 0, false},
                      DFlashCase{{97}, 5, 8, 2, 64, 31, true},       // d 64, odd sizes
                      DFlashCase{{1, 1, 1}, 3, 4, 1, 64, 0, false},  // no context, hk 1
                      DFlashCase{{1, 1, 1}, 3, 8, 2, 128, 0, true},
                      DFlashCase{{700, 333}, 24, 32, 8, 128, 200, true},  // bench, scaled
                      DFlashCase{{2000}, 40, 32, 8, 128, 700, true},      // many tiles
                      DFlashCase{{2000}, 17, 8, 2, 64, 0, false},         // d 64, no window
                      DFlashCase{{130, 70}, 9, 16, 4, 128, 1000, true},   // window > doc
                      DFlashCase{{200}, 12, 8, 2, 128, 7, true},          // window < block
                      DFlashCase{{300}, 12, 4, 1, 128, 65, true},         // W - 1 = tile
                      DFlashCase{{64, 128, 65}, 7, 4, 1, 64, 0, true}));  // exact tiles

// Runs the split backward twice on fresh random inputs and expects every output equal
// bitwise (no atomics, a fixed order).
TEST(DFlashWgmmaRepeatTest, OutputsRepeatBitwise) {
  const DFlashCase c{{2000, 300}, 40, 32, 8, 128, 700, true};
  const DFlashLayout lay = MakeDFlashLayout(c.lens, c.nb, 7);
  const int64_t t = lay.t, rows = int64_t{c.nb} * kDFlashBlockSize;
  auto q = RandomBf16(rows * c.hq * c.d, 71), kb = RandomBf16(rows * c.hk * c.d, 72),
       vb = RandomBf16(rows * c.hk * c.d, 73), kc = RandomBf16(t * c.hk * c.d, 74),
       vc = RandomBf16(t * c.hk * c.d, 75), dout = RandomBf16(rows * c.hq * c.d, 76);
  const DFlashAttentionConfig cfg{c.window, c.causal, 0.0f};
  const Shape qs{rows, c.hq, c.d}, bs{rows, c.hk, c.d}, cs{t, c.hk, c.d}, ls{rows, c.hq};
  const auto bf = DType::kBF16, f32 = DType::kF32;
  DevBuf<bf16> gq(q), gkb(kb), gvb(vb), gkc(kc), gvc(vc), gdout(dout), gout(q.size());
  DevBuf<int32_t> ganc(lay.anchors), gds(lay.doc_start);
  DevBuf<float> glse(rows * c.hq);
  DFlashAttentionInputs din{gq.View(bf, qs),
                            gkb.View(bf, bs),
                            gvb.View(bf, bs),
                            gkc.View(bf, cs),
                            gvc.View(bf, cs),
                            ganc.View(DType::kI32, {c.nb}),
                            gds.View(DType::kI32, {c.nb})};
  Status s = attention_internal::DFlashAttentionForwardPath(
      DFlashPath::kMma, din, cfg, gout.View(bf, qs), glse.View(f32, ls), nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  struct Run {
    std::vector<bf16> dq, dkb, dvb;
    std::vector<float> dkc, dvc, delta;
  };
  auto run = [&]() {
    DevBuf<bf16> gdq(q.size()), gdkb(kb.size()), gdvb(vb.size());
    DevBuf<float> gdkc(kc.size()), gdvc(vc.size()), gdelta(rows * c.hq);
    const Status st = attention_internal::DFlashAttentionBackwardPath(
        DFlashPath::kMma, din, cfg, gout.View(bf, qs), glse.View(f32, ls), gdout.View(bf, qs),
        {gdq.View(bf, qs), gdkb.View(bf, bs), gdvb.View(bf, bs), gdkc.View(f32, cs),
         gdvc.View(f32, cs), gdelta.View(f32, ls)},
        nullptr);
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return Run{gdq.ToHost(),  gdkb.ToHost(), gdvb.ToHost(),
               gdkc.ToHost(), gdvc.ToHost(), gdelta.ToHost()};
  };
  const Run a = run(), b = run();
  auto same = [](const auto& x, const auto& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) == 0;
  };
  EXPECT_TRUE(same(a.dq, b.dq)) << "dq_blk differs between two runs";
  EXPECT_TRUE(same(a.dkb, b.dkb)) << "dk_blk differs between two runs";
  EXPECT_TRUE(same(a.dvb, b.dvb)) << "dv_blk differs between two runs";
  EXPECT_TRUE(same(a.dkc, b.dkc)) << "dk_ctx differs between two runs";
  EXPECT_TRUE(same(a.dvc, b.dvc)) << "dv_ctx differs between two runs";
  EXPECT_TRUE(same(a.delta, b.delta)) << "delta differs between two runs";
}

// The launcher refuses what it lacks instead of running it: group != 4, head_dim 256, no
// delta scratch. Nothing is launched, so the null tensors are never read.
TEST(DFlashWgmmaRefusalTest, LauncherRefusesUnsupportedShapes) {
  float delta = 0.0f;
  struct Shape3 {
    int hq, hk, d;
    bool with_delta;
  };
  for (const Shape3 sh :
       {Shape3{8, 4, 128, true}, Shape3{16, 2, 128, true}, Shape3{32, 8, 256, true},
        Shape3{32, 8, 128, false}, Shape3{6, 2, 64, true}}) {
    SCOPED_TRACE(fmt::format("h{}/{} d{} delta {}", sh.hq, sh.hk, sh.d, sh.with_delta));
    attention_internal::DFlashKernelParams p{};
    p.nb = 1;
    p.hq = sh.hq;
    p.hk = sh.hk;
    p.d = sh.d;
    p.delta = sh.with_delta ? &delta : nullptr;
    EXPECT_EQ(attention_internal::LaunchDFlashWgmmaQueryBackward(p, nullptr),
              cudaErrorInvalidValue);
  }
}

// Groups the warpgroup kernel refuses keep the mma.sync query-major kernel on the split path,
// and so does group 4 under DFlashPath::kMmaSync (with the mma.sync context kernel at d 128
// too); all still match the CPU reference.
class DFlashWgmmaFallbackTest : public ::testing::TestWithParam<DFlashCase> {};

TEST_P(DFlashWgmmaFallbackTest, SplitBackwardMatchesCpu) {
  const DFlashCase& c = GetParam();
  SCOPED_TRACE(DFlashCaseName(c));
  const DFlashPath path = c.hq == 4 * c.hk ? DFlashPath::kMmaSync : DFlashPath::kMma;
  EXPECT_EQ(PlanOnThisDevice(path, c.hq, c.hk, c.d).query_backward, DFlashKernel::kMmaSync);
  CheckDFlashCase(c, path, 43, /*split=*/true);
}

INSTANTIATE_TEST_SUITE_P(
    OtherGroups, DFlashWgmmaFallbackTest,
    ::testing::Values(DFlashCase{{300, 70}, 11, 16, 8, 128, 100, true},   // G 2
                      DFlashCase{{257, 129}, 16, 8, 1, 128, 65, true},    // G 8
                      DFlashCase{{500}, 13, 12, 4, 128, 100, true},       // G 3
                      DFlashCase{{120, 40}, 7, 10, 2, 64, 50, false},     // G 5
                      DFlashCase{{700, 333}, 24, 32, 8, 128, 200, true},  // G 4, kMmaSync
                      DFlashCase{{97}, 5, 8, 2, 64, 31, true}));          // G 4 d 64, kMmaSync

}  // namespace
}  // namespace tandem::kernels
#endif  // TANDEM_HAVE_CUDA
