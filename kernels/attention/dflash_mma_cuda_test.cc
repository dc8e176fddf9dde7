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
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_cuda_testing.h"
#include "kernels/attention/attention_testing.h"
#include "kernels/attention/dflash_path.h"

namespace tandem::kernels {
namespace {

using namespace attention_testing;
using attention_internal::DFlashAttentionBackwardPath;
using attention_internal::DFlashAttentionForwardPath;
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
        ::testing::Values(DFlashCase{{300}, 12, 4, 4, 128, 0, false},                // one long doc
                          DFlashCase{{300}, 12, 4, 4, 128, 64, true},                // window = tile
                          DFlashCase{{5, 1, 40, 1, 77, 9}, 20, 8, 2, 64, 0, false},  // many short
                          DFlashCase{{5, 1, 40, 1, 77, 9}, 20, 8, 2, 64, 16, true},
                          DFlashCase{{130, 70}, 9, 16, 4, 128, 1000, true},   // window > doc
                          DFlashCase{{33, 200}, 64, 8, 8, 128, 40, false},    // dense anchors
                          DFlashCase{{97}, 5, 6, 3, 64, 31, true},            // G 2, odd sizes
                          DFlashCase{{1, 1, 1}, 3, 12, 4, 64, 0, false},      // G 3, no context
                          DFlashCase{{700, 333}, 24, 32, 8, 128, 200, true},  // bench, scaled
                          DFlashCase{{700, 333}, 24, 32, 8, 128, 0, false},   // full layer
                          DFlashCase{{257, 129}, 16, 8, 1, 128, 65, true},    // G 8
                          DFlashCase{{513}, 10, 8, 1, 64, 0, true}),          // G 8, d 64
        ::testing::Values(DFlashPath::kMma, DFlashPath::kSimt)));

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
