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
#include "kernels/attention/dflash_path.h"

namespace tandem::kernels {
namespace {

using namespace attention_testing;

// Tolerances (kOutTol, kOutRtol, kLseTol) and their justification: attention_cuda_testing.h.

class DFlashCudaTest : public ::testing::TestWithParam<DFlashCase> {};

// The public entry points (kAuto: the MMA kernels where they apply, else SIMT).
TEST_P(DFlashCudaTest, ForwardAndBackwardMatchCpu) {
  SCOPED_TRACE(DFlashCaseName(GetParam()));
  CheckDFlashCase(GetParam(), attention_internal::DFlashPath::kAuto, 7);
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

// The split backward (delta scratch given): the key-major context-gradient kernel on every
// case above, plus a GQA group of 8 (two head chunks per item) and a key tile seen by more
// blocks than one pass of the kernel's block list holds (kCtxListCap = 1024).
class DFlashSplitCudaTest : public ::testing::TestWithParam<DFlashCase> {};

TEST_P(DFlashSplitCudaTest, ForwardAndBackwardMatchCpu) {
  SCOPED_TRACE(DFlashCaseName(GetParam()));
  CheckDFlashCase(GetParam(), attention_internal::DFlashPath::kAuto, 9, /*split=*/true);
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, DFlashSplitCudaTest,
    ::testing::Values(DFlashCase{{300}, 12, 4, 4, 128, 0, false},
                      DFlashCase{{300}, 12, 4, 4, 128, 64, true},
                      DFlashCase{{5, 1, 40, 1, 77, 9}, 20, 8, 2, 64, 0, false},
                      DFlashCase{{5, 1, 40, 1, 77, 9}, 20, 8, 2, 64, 16, true},
                      DFlashCase{{130, 70}, 9, 16, 4, 128, 1000, true},
                      DFlashCase{{33, 200}, 64, 8, 8, 128, 40, false},
                      DFlashCase{{97}, 5, 2, 1, 256, 31, true},
                      DFlashCase{{1, 1, 1}, 3, 12, 4, 64, 0, false},
                      DFlashCase{{500, 300}, 70, 16, 2, 128, 0, false},     // G = 8
                      DFlashCase{{1500, 40}, 1100, 2, 2, 64, 0, true},   // > 1024 per tile
                      DFlashCase{{200, 90}, 12, 8, 2, 128, 5, false},    // window < block
                      DFlashCase{{300}, 12, 4, 4, 128, 65, true}));      // W - 1 = key tile

// The window's edge in closed form (attention_testing.h, WindowEdgeCase) on both kernel
// families, forward: each slot's output and lse count exactly the keys the serving rule
// shows it (W - 1 - i context keys at slot i), which the old rule gets wrong.
TEST(DFlashCudaWindowEdge, FollowsServingRule) {
  using attention_internal::DFlashPath;
  for (DFlashPath path : {DFlashPath::kMma, DFlashPath::kSimt}) {
    for (const WindowEdgeCase& c :
         {WindowEdgeCase{30, 20, true}, WindowEdgeCase{30, 8, false}, WindowEdgeCase{30, 5, true},
          WindowEdgeCase{3, 12, true}, WindowEdgeCase{100, 70, true, 128},
          WindowEdgeCase{30, 1, false}}) {
      SCOPED_TRACE(fmt::format("anchor {} window {} causal {} d {} {}", c.a, c.window, c.causal,
                               c.d, path == DFlashPath::kMma ? "mma" : "simt"));
      WindowEdgeProblem p = MakeWindowEdgeProblem(c);
      const int64_t t = c.a + 1, d = c.d;
      const Shape qs{16, 1, d}, cs{t, 1, d};
      DevBuf<bf16> gq(p.q), gkb(p.kb), gvb(p.vb), gkc(p.kc), gvc(p.vc), gout(p.q.size());
      DevBuf<int32_t> ganc(p.anchors), gds(p.doc_start);
      DevBuf<float> glse(16);
      const auto bf = DType::kBF16;
      DFlashAttentionInputs din{gq.View(bf, qs),  gkb.View(bf, qs), gvb.View(bf, qs),
                                gkc.View(bf, cs), gvc.View(bf, cs), ganc.View(DType::kI32, {1}),
                                gds.View(DType::kI32, {1})};
      const Status s = attention_internal::DFlashAttentionForwardPath(
          path, din, {c.window, c.causal, 0.0f}, gout.View(bf, qs),
          glse.View(DType::kF32, {16, 1}), nullptr);
      ASSERT_TRUE(s.ok()) << s.ToString();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<bf16> out = gout.ToHost();
      const std::vector<float> lse = glse.ToHost();
      for (int i = 0; i < 16; ++i) {
        EXPECT_NEAR(out[i * d].f(), p.want_out[i], kOutTol) << "slot " << i;
        EXPECT_NEAR(out[i * d + d - 1].f(), p.want_out[i], kOutTol) << "slot " << i;
        EXPECT_NEAR(lse[i], p.want_lse[i], kLseTol) << "slot " << i;
      }
    }
  }
}

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
