// The query-major split backward on Hopper warpgroup MMA (dflash_wgmma_bwd.cu: GQA group 4,
// head_dim 64 or 128) against the CPU reference (label gpu; run on the H200): odd shapes
// (partial and empty context tiles, ranges of many tiles so the 2-stage ring wraps, window
// cuts, odd nb, causal or not), its outputs bitwise repeatable run to run, and the shapes it
// refuses (other groups and head dims) refused by its launcher and run by the mma.sync kernel
// through the same entry point. Without CUDA this file is empty and the GPU main reports
// SKIPPED.
#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_cuda_testing.h"
#include "kernels/attention/attention_testing.h"
#include "kernels/attention/dflash_path.h"
#include "kernels/attention/dflash_wgmma_internal.h"

namespace tandem::kernels {
namespace {

using namespace attention_testing;
using attention_internal::DFlashPath;
using attention_internal::DFlashWgmmaQuerySupported;

static_assert(DFlashWgmmaQuerySupported(4, 128) && DFlashWgmmaQuerySupported(4, 64));
static_assert(!DFlashWgmmaQuerySupported(2, 128) && !DFlashWgmmaQuerySupported(8, 128) &&
              !DFlashWgmmaQuerySupported(4, 256) && !DFlashWgmmaQuerySupported(1, 64));

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

// Groups the warpgroup kernel refuses keep the mma.sync query-major kernel on the split path
// and still match the CPU reference.
class DFlashWgmmaFallbackTest : public ::testing::TestWithParam<DFlashCase> {};

TEST_P(DFlashWgmmaFallbackTest, SplitBackwardMatchesCpu) {
  SCOPED_TRACE(DFlashCaseName(GetParam()));
  CheckDFlashCase(GetParam(), DFlashPath::kMma, 43, /*split=*/true);
}

INSTANTIATE_TEST_SUITE_P(OtherGroups, DFlashWgmmaFallbackTest,
                         ::testing::Values(DFlashCase{{300, 70}, 11, 16, 8, 128, 100, true},  // G 2
                                           DFlashCase{{257, 129}, 16, 8, 1, 128, 65, true},   // G 8
                                           DFlashCase{{500}, 13, 12, 4, 128, 100, true},      // G 3
                                           DFlashCase{{120, 40}, 7, 10, 2, 64, 50, false}));  // G 5

}  // namespace
}  // namespace tandem::kernels
#endif  // TANDEM_HAVE_CUDA
