// CUDA attention against the CPU references (label gpu; run on the H200). Failures print the
// worst element as (row, head, dim) with both values. Outputs are pre-filled with NaN so an
// unwritten element fails the comparison. Without CUDA this file is empty and the GPU test
// main reports SKIPPED.
#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_cuda_testing.h"
#include "kernels/attention/attention_testing.h"

namespace tandem::kernels {
namespace {

using namespace attention_testing;

// Both sides read the same bf16 inputs and accumulate in fp32; they differ by summation order
// (~1e-6) and by where bf16 rounding lands: outputs of magnitude <= 1 may differ by one
// bf16 ulp (2^-8 relative), hence 8e-3 + 1e-2 relative. LSE is fp32 end to end: 1e-3.
constexpr double kOutTol = 8e-3, kOutRtol = 1e-2, kLseTol = 1e-3;

struct DFlashCase {
  std::vector<int> lens;
  int nb, hq, hk, d, window;
  bool causal;
};

std::string Name(const DFlashCase& c) {
  return fmt::format("docs{} nb{} h{}/{} d{} w{} causal{}", c.lens.size(), c.nb, c.hq, c.hk,
                     c.d, c.window, c.causal);
}

class DFlashCudaTest : public ::testing::TestWithParam<DFlashCase> {};

TEST_P(DFlashCudaTest, ForwardAndBackwardMatchCpu) {
  const DFlashCase& c = GetParam();
  SCOPED_TRACE(Name(c));
  DFlashLayout lay = MakeDFlashLayout(c.lens, c.nb, 7);
  const int64_t t = lay.t, rows = int64_t{c.nb} * kDFlashBlockSize;
  auto q = RandomBf16(rows * c.hq * c.d, 1), kb = RandomBf16(rows * c.hk * c.d, 2),
       vb = RandomBf16(rows * c.hk * c.d, 3), kc = RandomBf16(t * c.hk * c.d, 4),
       vc = RandomBf16(t * c.hk * c.d, 5), dout = RandomBf16(rows * c.hq * c.d, 6);
  const DFlashAttentionConfig cfg{c.window, c.causal, 0.0f};
  const Shape qs{rows, c.hq, c.d}, bs{rows, c.hk, c.d}, cs{t, c.hk, c.d}, ls{rows, c.hq};

  // CPU reference.
  DFlashAttentionInputs hin{Host(q, qs), Host(kb, bs), Host(vb, bs), Host(kc, cs), Host(vc, cs),
                            Host(lay.anchors, {c.nb}), Host(lay.doc_start, {c.nb})};
  std::vector<bf16> out(q.size()), dq(q.size()), dkb(kb.size()), dvb(vb.size());
  std::vector<float> lse(rows * c.hq), dkc(kc.size()), dvc(vc.size());
  ASSERT_TRUE(DFlashAttentionForwardCpu(hin, cfg, Host(out, qs), Host(lse, ls)).ok());
  ASSERT_TRUE(DFlashAttentionBackwardCpu(hin, cfg, Host(out, qs), Host(lse, ls), Host(dout, qs),
                                         {Host(dq, qs), Host(dkb, bs), Host(dvb, bs),
                                          Host(dkc, cs), Host(dvc, cs)})
                  .ok());

  // CUDA.
  DevBuf<bf16> gq(q), gkb(kb), gvb(vb), gkc(kc), gvc(vc), gdout(dout);
  DevBuf<int32_t> ganc(lay.anchors), gds(lay.doc_start);
  DevBuf<bf16> gout(q.size()), gdq(q.size()), gdkb(kb.size()), gdvb(vb.size());
  DevBuf<float> glse(lse.size()), gdkc(kc.size()), gdvc(vc.size());
  const auto bf = DType::kBF16, f32 = DType::kF32;
  DFlashAttentionInputs din{gq.View(bf, qs),  gkb.View(bf, bs), gvb.View(bf, bs),
                            gkc.View(bf, cs), gvc.View(bf, cs), ganc.View(DType::kI32, {c.nb}),
                            gds.View(DType::kI32, {c.nb})};
  Status s = DFlashAttentionForward(din, cfg, gout.View(bf, qs), glse.View(f32, ls), nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  s = DFlashAttentionBackward(din, cfg, gout.View(bf, qs), glse.View(f32, ls),
                              gdout.View(bf, qs),
                              {gdq.View(bf, qs), gdkb.View(bf, bs), gdvb.View(bf, bs),
                               gdkc.View(f32, cs), gdvc.View(f32, cs)},
                              nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  ExpectClose("out", ToFloat(gout.ToHost()), ToFloat(out), c.hq, c.d, kOutTol, kOutRtol);
  ExpectClose("lse", glse.ToHost(), lse, c.hq, 1, kLseTol, kLseTol);
  // Gradients sum up to ~|context| terms of O(1) size in fp32 in a different order on each
  // side, then dq/dk_blk/dv_blk are rounded to bf16: 2e-2 absolute + 2e-2 relative is a few
  // bf16 ulps, while a masking or indexing error changes them at O(0.1) or more.
  constexpr double kGradTol = 2e-2;
  ExpectClose("dq_blk", ToFloat(gdq.ToHost()), ToFloat(dq), c.hq, c.d, kGradTol, kGradTol);
  ExpectClose("dk_blk", ToFloat(gdkb.ToHost()), ToFloat(dkb), c.hk, c.d, kGradTol, kGradTol);
  ExpectClose("dv_blk", ToFloat(gdvb.ToHost()), ToFloat(dvb), c.hk, c.d, kGradTol, kGradTol);
  ExpectClose("dk_ctx", gdkc.ToHost(), dkc, c.hk, c.d, kGradTol, kGradTol);
  ExpectClose("dv_ctx", gdvc.ToHost(), dvc, c.hk, c.d, kGradTol, kGradTol);
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, DFlashCudaTest,
    ::testing::Values(DFlashCase{{300}, 12, 4, 4, 128, 0, false},            // one long doc
                      DFlashCase{{300}, 12, 4, 4, 128, 64, true},            // sliding window
                      DFlashCase{{5, 1, 40, 1, 77, 9}, 20, 8, 2, 64, 0, false},  // many short
                      DFlashCase{{5, 1, 40, 1, 77, 9}, 20, 8, 2, 64, 16, true},
                      DFlashCase{{130, 70}, 9, 16, 4, 128, 1000, true},      // window > doc
                      DFlashCase{{33, 200}, 64, 8, 8, 128, 40, false},       // dense anchors
                      DFlashCase{{97}, 5, 2, 1, 256, 31, true},              // d 256, odd sizes
                      DFlashCase{{1, 1, 1}, 3, 12, 4, 64, 0, false}));       // G = 3, no context

struct VarlenCase {
  std::vector<int> lens;
  int hq, hk, d;
};

class VarlenCudaTest
    : public ::testing::TestWithParam<std::tuple<VarlenCase, AttentionBackend>> {};

TEST_P(VarlenCudaTest, MatchesCpu) {
  const auto& [c, backend] = GetParam();
  std::vector<int32_t> cu{0};
  int max_len = 0;
  for (int l : c.lens) {
    cu.push_back(cu.back() + l);
    max_len = std::max(max_len, l);
  }
  const int64_t t = cu.back(), docs = static_cast<int64_t>(c.lens.size());
  auto q = RandomBf16(t * c.hq * c.d, 11), k = RandomBf16(t * c.hk * c.d, 12),
       v = RandomBf16(t * c.hk * c.d, 13);
  const Shape qs{t, c.hq, c.d}, ks{t, c.hk, c.d}, ls{t, c.hq}, cs{docs + 1};
  std::vector<bf16> out(q.size());
  std::vector<float> lse(t * c.hq);
  ASSERT_TRUE(CausalVarlenAttentionForwardCpu(Host(q, qs), Host(k, ks), Host(v, ks),
                                              Host(cu, cs), max_len, 0.0f, Host(out, qs),
                                              Host(lse, ls))
                  .ok());
  auto op = CausalVarlenAttention::Create(0, backend);
  ASSERT_TRUE(op.ok()) << op.status().ToString();
  DevBuf<bf16> gq(q), gk(k), gv(v), gout(q.size());
  DevBuf<int32_t> gcu(cu);
  DevBuf<float> glse(lse.size());
  const auto bf = DType::kBF16;
  for (int rep = 0; rep < 2; ++rep) {  // the second call reuses the cached plan
    Status s = op.value()->Forward(gq.View(bf, qs), gk.View(bf, ks), gv.View(bf, ks),
                                   gcu.View(DType::kI32, cs), max_len, 0.0f, gout.View(bf, qs),
                                   glse.View(DType::kF32, ls), nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  std::printf("backend: %s\n", op.value()->last_backend());
  // cuDNN rounds P to bf16 before P @ V: O(2^-9) relative per weight, averaging out over keys.
  ExpectClose("out", ToFloat(gout.ToHost()), ToFloat(out), c.hq, c.d, kOutTol, kOutRtol);
  ExpectClose("lse", glse.ToHost(), lse, c.hq, 1, kLseTol, kLseTol);
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, VarlenCudaTest,
    ::testing::Combine(::testing::Values(VarlenCase{{1000}, 4, 4, 128},          // one long
                                         VarlenCase{{17, 250, 3, 64, 129}, 8, 2, 128},
                                         VarlenCase{{1, 1, 5, 1, 2}, 4, 1, 128},  // length 1
                                         VarlenCase{{300, 211}, 16, 4, 64},
                                         VarlenCase{{130, 7}, 4, 2, 256}),
                       ::testing::Values(AttentionBackend::kAuto, AttentionBackend::kFallback)));

}  // namespace
}  // namespace tandem::kernels
#endif  // TANDEM_HAVE_CUDA
