// CPU references of attention.h against float64 naive attention with explicit masks, the
// DFlash backward against float64 finite differences, and the choice of DFlash kernels by
// shape and device (dflash_plan.h).
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_testing.h"
#include "kernels/attention/dflash_plan.h"

namespace tandem::kernels {
namespace {

using namespace attention_testing;

TensorView Host(std::vector<bf16>& v, Shape s) { return TensorView(v.data(), DType::kBF16, s); }
TensorView Host(std::vector<float>& v, Shape s) { return TensorView(v.data(), DType::kF32, s); }
TensorView Host(std::vector<int32_t>& v, Shape s) { return TensorView(v.data(), DType::kI32, s); }

// Outputs are stored as bf16: rounding costs at most half an ulp, 2^-9 relative, and the
// fp32 math adds ~1e-6; |out| <= max|v| = 1, so 4e-3 absolute + 4e-3 relative is ~2 ulps.
constexpr double kOutTol = 4e-3;
// LSE stays fp32 throughout: fp32 sums of <= 1000 terms of size ~1 are good to ~1e-5.
constexpr double kLseTol = 1e-4;

struct VarlenCase {
  std::vector<int> lens;
  int hq, hk, d;
};

class VarlenCpuTest : public ::testing::TestWithParam<VarlenCase> {};

TEST_P(VarlenCpuTest, MatchesNaiveFloat64) {
  const VarlenCase& c = GetParam();
  std::vector<int32_t> cu{0};
  int max_len = 0;
  for (int l : c.lens) {
    cu.push_back(cu.back() + l);
    max_len = std::max(max_len, l);
  }
  const int64_t t = cu.back();
  auto q = RandomBf16(t * c.hq * c.d, 1), k = RandomBf16(t * c.hk * c.d, 2),
       v = RandomBf16(t * c.hk * c.d, 3);
  std::vector<bf16> out(q.size());
  std::vector<float> lse(t * c.hq);
  ASSERT_TRUE(CausalVarlenAttentionForwardCpu(
                  Host(q, {t, c.hq, c.d}), Host(k, {t, c.hk, c.d}), Host(v, {t, c.hk, c.d}),
                  Host(cu, {static_cast<int64_t>(cu.size())}), max_len, 0.0f,
                  Host(out, {t, c.hq, c.d}), Host(lse, {t, c.hq}))
                  .ok());
  std::vector<double> want_out, want_lse;
  NaiveMaskedAttention(ToDouble(q), ToDouble(k), ToDouble(v), VarlenCausalMask(cu), t, t, c.hq,
                       c.hk, c.d, 1.0 / std::sqrt(c.d), &want_out, &want_lse);
  auto r = Compare(ToFloat(out), want_out, kOutTol, kOutTol);
  EXPECT_TRUE(r.ok) << r.ToString("out");
  r = Compare(lse, want_lse, kLseTol, kLseTol);
  EXPECT_TRUE(r.ok) << r.ToString("lse");
}

INSTANTIATE_TEST_SUITE_P(Layouts, VarlenCpuTest,
                         ::testing::Values(VarlenCase{{37}, 4, 4, 64},          // one long doc
                                           VarlenCase{{5, 9, 3, 7, 11}, 8, 2, 64},  // many short
                                           VarlenCase{{1, 1, 4, 1}, 4, 1, 32},  // length-1 docs
                                           VarlenCase{{13, 1, 20}, 4, 2, 128}));

struct DFlashCase {
  std::vector<int> lens;
  int nb, hq, hk, d, window;
  bool causal;
};

struct DFlashProblem {
  DFlashLayout layout;
  int64_t rows;
  std::vector<bf16> q, kb, vb, kc, vc;
  DFlashAttentionInputs Inputs(const DFlashCase& c) {
    const int64_t t = layout.t, nb = c.nb;
    return DFlashAttentionInputs{Host(q, {rows, c.hq, c.d}),
                                 Host(kb, {rows, c.hk, c.d}),
                                 Host(vb, {rows, c.hk, c.d}),
                                 Host(kc, {t, c.hk, c.d}),
                                 Host(vc, {t, c.hk, c.d}),
                                 Host(layout.anchors, {nb}),
                                 Host(layout.doc_start, {nb})};
  }
};

DFlashProblem MakeProblem(const DFlashCase& c, uint64_t seed) {
  DFlashProblem p;
  p.layout = MakeDFlashLayout(c.lens, c.nb, seed);
  p.rows = int64_t{c.nb} * kDFlashBlockSize;
  const int64_t t = p.layout.t;
  p.q = RandomBf16(p.rows * c.hq * c.d, seed + 1);
  p.kb = RandomBf16(p.rows * c.hk * c.d, seed + 2);
  p.vb = RandomBf16(p.rows * c.hk * c.d, seed + 3);
  p.kc = RandomBf16(t * c.hk * c.d, seed + 4);
  p.vc = RandomBf16(t * c.hk * c.d, seed + 5);
  return p;
}

// Keys of the naive problem: [k_ctx rows; k_blk rows], matching DFlashMask.
std::vector<double> Concat(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r = a;
  r.insert(r.end(), b.begin(), b.end());
  return r;
}

class DFlashCpuTest : public ::testing::TestWithParam<DFlashCase> {};

TEST_P(DFlashCpuTest, ForwardMatchesNaiveFloat64) {
  const DFlashCase& c = GetParam();
  DFlashProblem p = MakeProblem(c, 10);
  const DFlashAttentionConfig cfg{c.window, c.causal, 0.0f};
  std::vector<bf16> out(p.q.size());
  std::vector<float> lse(p.rows * c.hq);
  ASSERT_TRUE(DFlashAttentionForwardCpu(p.Inputs(c), cfg, Host(out, {p.rows, c.hq, c.d}),
                                        Host(lse, {p.rows, c.hq}))
                  .ok());
  std::vector<double> want_out, want_lse;
  NaiveMaskedAttention(ToDouble(p.q), Concat(ToDouble(p.kc), ToDouble(p.kb)),
                       Concat(ToDouble(p.vc), ToDouble(p.vb)),
                       DFlashMask(p.layout.anchors, p.layout.doc_start, p.layout.t, c.window,
                                  c.causal),
                       p.rows, p.layout.t + p.rows, c.hq, c.hk, c.d, 1.0 / std::sqrt(c.d),
                       &want_out, &want_lse);
  auto r = Compare(ToFloat(out), want_out, kOutTol, kOutTol);
  EXPECT_TRUE(r.ok) << r.ToString("out");
  r = Compare(lse, want_lse, kLseTol, kLseTol);
  EXPECT_TRUE(r.ok) << r.ToString("lse");
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, DFlashCpuTest,
    ::testing::Values(DFlashCase{{40}, 4, 4, 4, 32, 0, false},         // one doc, full
                      DFlashCase{{40}, 4, 4, 4, 32, 8, true},          // small window
                      DFlashCase{{9, 1, 14, 3}, 9, 8, 2, 64, 5, true},  // short + length-1
                      DFlashCase{{9, 1, 14, 3}, 9, 8, 2, 64, 100, false},  // window > doc
                      DFlashCase{{25, 30}, 6, 4, 1, 16, 0, true},
                      DFlashCase{{40, 7}, 5, 4, 2, 32, 6, false}));  // window < 16, bidirectional

// The backward of the CPU reference against central differences of the float64 naive
// forward's loss L = sum(dO * O), for every input element.
TEST(DFlashCpuBackward, MatchesFiniteDifferences) {
  for (bool causal : {false, true}) {
    const DFlashCase c{{7, 1, 12}, 5, 4, 2, 8, causal ? 4 : 3, causal};
    DFlashProblem p = MakeProblem(c, 20);
    const DFlashAttentionConfig cfg{c.window, c.causal, 0.0f};
    const int64_t t = p.layout.t, rows = p.rows;
    auto dout = RandomBf16(rows * c.hq * c.d, 99);
    std::vector<bf16> out(p.q.size()), dq(p.q.size()), dkb(p.kb.size()), dvb(p.vb.size());
    std::vector<float> lse(rows * c.hq), dkc(p.kc.size()), dvc(p.vc.size());
    ASSERT_TRUE(DFlashAttentionForwardCpu(p.Inputs(c), cfg, Host(out, {rows, c.hq, c.d}),
                                          Host(lse, {rows, c.hq}))
                    .ok());
    DFlashAttentionGrads g{Host(dq, {rows, c.hq, c.d}), Host(dkb, {rows, c.hk, c.d}),
                           Host(dvb, {rows, c.hk, c.d}), Host(dkc, {t, c.hk, c.d}),
                           Host(dvc, {t, c.hk, c.d}), TensorView()};
    ASSERT_TRUE(DFlashAttentionBackwardCpu(p.Inputs(c), cfg, Host(out, {rows, c.hq, c.d}),
                                           Host(lse, {rows, c.hq}), Host(dout, {rows, c.hq, c.d}),
                                           g)
                    .ok());

    const auto mask = DFlashMask(p.layout.anchors, p.layout.doc_start, t, c.window, c.causal);
    std::vector<double> xq = ToDouble(p.q), xkb = ToDouble(p.kb), xvb = ToDouble(p.vb),
                        xkc = ToDouble(p.kc), xvc = ToDouble(p.vc), xdo = ToDouble(dout);
    auto loss = [&] {
      std::vector<double> o, l;
      NaiveMaskedAttention(xq, Concat(xkc, xkb), Concat(xvc, xvb), mask, rows, t + rows, c.hq,
                           c.hk, c.d, 1.0 / std::sqrt(c.d), &o, &l);
      double s = 0.0;
      for (size_t i = 0; i < o.size(); ++i) s += o[i] * xdo[i];
      return s;
    };
    // float64 central differences with h = 1e-5: truncation O(h^2) and cancellation
    // O(1e-16 / h) are both below 1e-9, far under the bf16 tolerance below.
    auto fd = [&](std::vector<double>& x) {
      std::vector<double> grad(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        const double x0 = x[i], h = 1e-5;
        x[i] = x0 + h;
        const double up = loss();
        x[i] = x0 - h;
        const double down = loss();
        x[i] = x0;
        grad[i] = (up - down) / (2 * h);
      }
      return grad;
    };
    // The reference rounds dq/dk_blk/dv_blk to bf16 (2^-9 relative) and uses the bf16 forward
    // output in rowsum(dO * O); gradients here are O(1), so 1e-2 absolute + 1e-2 relative
    // covers a few ulps while any masking or formula error shows up at O(0.1).
    constexpr double kTol = 1e-2;
    auto r = Compare(ToFloat(dq), fd(xq), kTol, kTol);
    EXPECT_TRUE(r.ok) << r.ToString("dq_blk") << " causal=" << causal;
    r = Compare(ToFloat(dkb), fd(xkb), kTol, kTol);
    EXPECT_TRUE(r.ok) << r.ToString("dk_blk") << " causal=" << causal;
    r = Compare(ToFloat(dvb), fd(xvb), kTol, kTol);
    EXPECT_TRUE(r.ok) << r.ToString("dv_blk") << " causal=" << causal;
    r = Compare(dkc, fd(xkc), kTol, kTol);
    EXPECT_TRUE(r.ok) << r.ToString("dk_ctx") << " causal=" << causal;
    r = Compare(dvc, fd(xvc), kTol, kTol);
    EXPECT_TRUE(r.ok) << r.ToString("dv_ctx") << " causal=" << causal;
  }
}

// The serving rule at the window's edge (attention_testing.h, WindowEdgeCase): slot i sees
// W - 1 - i context keys, not W; with W < 16 the window also cuts the block's own keys.
// Every case here fails under the old rule (context keys >= anchor - W for all slots).
TEST(DFlashCpu, WindowEdgeFollowsServingRule) {
  for (const WindowEdgeCase& c : {WindowEdgeCase{30, 20, true}, WindowEdgeCase{30, 8, false},
                                  WindowEdgeCase{30, 5, true}, WindowEdgeCase{3, 12, true},
                                  WindowEdgeCase{30, 1, false}}) {
    SCOPED_TRACE(fmt::format("anchor {} window {} causal {}", c.a, c.window, c.causal));
    WindowEdgeProblem p = MakeWindowEdgeProblem(c);
    const int64_t t = c.a + 1, d = c.d;
    std::vector<bf16> out(p.q.size());
    std::vector<float> lse(16);
    DFlashAttentionInputs in{Host(p.q, {16, 1, d}),  Host(p.kb, {16, 1, d}),
                             Host(p.vb, {16, 1, d}), Host(p.kc, {t, 1, d}),
                             Host(p.vc, {t, 1, d}),  Host(p.anchors, {1}),
                             Host(p.doc_start, {1})};
    ASSERT_TRUE(DFlashAttentionForwardCpu(in, {c.window, c.causal, 0.0f},
                                          Host(out, {16, 1, d}), Host(lse, {16, 1}))
                    .ok());
    for (int i = 0; i < 16; ++i) {
      EXPECT_NEAR(out[i * d].f(), p.want_out[i], kOutTol) << "slot " << i;
      EXPECT_NEAR(out[i * d + d - 1].f(), p.want_out[i], kOutTol) << "slot " << i;
      EXPECT_NEAR(lse[i], p.want_lse[i], kLseTol) << "slot " << i;
    }
  }
}

TEST(DFlashCpu, RejectsAnchorOutsideDocument) {
  const DFlashCase c{{10}, 1, 2, 2, 8, 0, false};
  DFlashProblem p = MakeProblem(c, 30);
  p.layout.doc_start[0] = p.layout.anchors[0] + 1;
  std::vector<bf16> out(p.q.size());
  std::vector<float> lse(p.rows * c.hq);
  Status s = DFlashAttentionForwardCpu(p.Inputs(c), DFlashAttentionConfig{},
                                       Host(out, {p.rows, c.hq, c.d}), Host(lse, {p.rows, c.hq}));
  EXPECT_FALSE(s.ok());
}

// The DFlash kernel choice: wgmma only on compute capability 9, for the shapes each wgmma
// kernel covers (forward and query-major backward: group 4 at d 64 / 128, the forward with a
// positive scale; context backward: d 128, any group); mma.sync for the other tensor-core
// shapes, and for every stage under kMmaSync; SIMT when asked or when mma.sync does not apply.
TEST(DFlashPlanTest, ChoosesByShapeAndDevice) {
  using attention_internal::DFlashKernel;
  using attention_internal::DFlashPath;
  using attention_internal::DFlashPlan;
  using attention_internal::SelectDFlashPlan;
  constexpr DFlashKernel kWg = DFlashKernel::kWgmma, kSync = DFlashKernel::kMmaSync,
                         kSimt = DFlashKernel::kSimt;
  struct Case {
    DFlashPath path;
    bool mma_applies;
    int64_t group, d;
    float scale;
    int cc_major;
    DFlashKernel fwd, query, ctx;
  };
  const Case cases[] = {
      {DFlashPath::kAuto, true, 4, 128, 0.1f, 9, kWg, kWg, kWg},  // the drafter's layers
      {DFlashPath::kMma, true, 4, 128, 0.1f, 9, kWg, kWg, kWg},
      {DFlashPath::kMma, true, 4, 64, 0.1f, 9, kWg, kWg, kSync},  // context wgmma: d 128 only
      {DFlashPath::kMma, true, 2, 128, 0.1f, 9, kSync, kSync, kWg},
      {DFlashPath::kMma, true, 8, 64, 0.1f, 9, kSync, kSync, kSync},
      {DFlashPath::kMma, true, 4, 128, -0.5f, 9, kSync, kWg, kWg},      // fwd needs scale > 0
      {DFlashPath::kMma, true, 4, 128, 0.1f, 8, kSync, kSync, kSync},   // Ampere
      {DFlashPath::kMma, true, 4, 128, 0.1f, 10, kSync, kSync, kSync},  // not sm_90a
      {DFlashPath::kMma, true, 4, 128, 0.1f, 0, kSync, kSync, kSync},   // no device answer
      {DFlashPath::kMmaSync, true, 4, 128, 0.1f, 9, kSync, kSync, kSync},
      {DFlashPath::kSimt, true, 4, 128, 0.1f, 9, kSimt, kSimt, kSimt},
      {DFlashPath::kAuto, false, 4, 128, 0.1f, 9, kSimt, kSimt, kSimt},  // unaligned, or G 12
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "path " << static_cast<int>(c.path) << " applies " << c.mma_applies << " G "
                 << c.group << " d " << c.d << " scale " << c.scale << " cc " << c.cc_major);
    const DFlashPlan plan =
        SelectDFlashPlan(c.path, c.mma_applies, c.group, c.d, c.scale, c.cc_major);
    EXPECT_EQ(plan.forward, c.fwd);
    EXPECT_EQ(plan.query_backward, c.query);
    EXPECT_EQ(plan.context_backward, c.ctx);
  }
  static_assert(attention_internal::DFlashMmaSupported(8, 128) &&
                !attention_internal::DFlashMmaSupported(12, 64) &&
                !attention_internal::DFlashMmaSupported(2, 256));
}

}  // namespace
}  // namespace tandem::kernels
