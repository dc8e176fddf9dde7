// The decode steps' CPU twins (decode_step.h) on odd shapes: a sequence split into calls
// gives bitwise the outputs and final state of one call (the property the hybrid decode cache
// stands on); the conv step from a zero state is bitwise the document-reset conv, and its
// history rows are the conv state after each accepted prefix; the delta rule step agrees with
// the float64 reference (GatedDeltaRuleForward) to fp32 rounding; a replay without outputs
// leaves the same state; bad arguments are refused with the argument named.
#include "kernels/linear_attention/decode_step.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/linear_attention/hybrid_ops.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels {
namespace {

constexpr int64_t kC = 37, kK = 4, kT = 13;

TensorView Rows(std::vector<bf16>& data, int64_t t, int64_t stride, int64_t cols,
                int64_t first = 0) {
  return TensorView(data.data(), DType::kBF16, {t + first, stride})
      .Narrow(0, first, t)
      .Narrow(1, 0, cols);
}

TEST(ConvStep, SplitCallsMatchTheDocumentConvBitwise) {
  std::vector<bf16> x = testing::RandomBf16(kT * (kC + 3), 1);  // rows padded: strided view
  std::vector<bf16> w = testing::RandomBf16(kC * kK, 2);
  const TensorView wv(w.data(), DType::kBF16, {kC, kK});
  std::vector<bf16> ref(kT * kC);
  std::vector<int32_t> cu = {0, static_cast<int32_t>(kT)};
  ASSERT_TRUE(CausalConv1dSiluForward(TensorView(ref.data(), DType::kBF16, {kT, kC}),
                                      Rows(x, kT, kC + 3, kC), wv,
                                      TensorView(cu.data(), DType::kI32, {2}), nullptr)
                  .ok());
  // Calls of 5, 1 and 7 tokens, each starting from the previous call's last K-1 rows.
  std::vector<bf16> state((kK - 1) * kC, bf16(0.f)), out(kT * kC);
  int64_t at = 0;
  for (int64_t n : {5, 1, 7}) {
    std::vector<bf16> history((kK - 1 + n) * kC);
    const TensorView h(history.data(), DType::kBF16, {kK - 1 + n, kC});
    const Status st = CausalConv1dSiluStep(
        TensorView(out.data() + at * kC, DType::kBF16, {n, kC}), h, Rows(x, n, kC + 3, kC, at),
        TensorView(state.data(), DType::kBF16, {kK - 1, kC}), wv, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    // History row r is cat row r = [state; x] row r.
    for (int64_t r = 0; r < kK - 1 + n; ++r)
      for (int64_t c = 0; c < kC; ++c) {
        const bf16 want = r < kK - 1 ? state[r * kC + c] : x[(at + r - (kK - 1)) * (kC + 3) + c];
        ASSERT_EQ(history[r * kC + c].bits, want.bits) << "row " << r;
      }
    std::copy(history.end() - (kK - 1) * kC, history.end(), state.begin());
    at += n;
  }
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(out[i].bits, ref[i].bits) << i;

  // With R = K-1 only the last K-1 rows are kept.
  std::vector<bf16> last((kK - 1) * kC), out2(2 * kC);
  std::vector<bf16> zero((kK - 1) * kC, bf16(0.f));
  ASSERT_TRUE(CausalConv1dSiluStep(TensorView(out2.data(), DType::kBF16, {2, kC}),
                                   TensorView(last.data(), DType::kBF16, {kK - 1, kC}),
                                   Rows(x, 2, kC + 3, kC),
                                   TensorView(zero.data(), DType::kBF16, {kK - 1, kC}), wv, nullptr)
                  .ok());
  for (int64_t c = 0; c < kC; ++c) {
    EXPECT_EQ(last[c].bits, zero[c].bits);                   // cat row 2: state row 2
    EXPECT_EQ(last[kC + c].bits, x[c].bits);                 // cat row 3: x row 0
    EXPECT_EQ(last[2 * kC + c].bits, x[(kC + 3) + c].bits);  // cat row 4: x row 1
  }
}

TEST(ConvStep, RefusesBadArguments) {
  std::vector<bf16> x(4 * kC), out(4 * kC), state(3 * kC), w(kC * kK), hist(9 * kC);
  const TensorView xv(x.data(), DType::kBF16, {4, kC}), ov(out.data(), DType::kBF16, {4, kC});
  const TensorView wv(w.data(), DType::kBF16, {kC, kK});
  const TensorView sv(state.data(), DType::kBF16, {3, kC});
  Status s =
      CausalConv1dSiluStep(ov, TensorView(hist.data(), DType::kBF16, {8, kC}), xv, sv, wv, nullptr);
  EXPECT_NE(s.ToString().find("history must be bf16 [R, 37] with 3 <= R <= 7"), std::string::npos)
      << s.ToString();
  s = CausalConv1dSiluStep(ov, TensorView(hist.data(), DType::kBF16, {4, kC}), xv,
                           TensorView(hist.data() + kC, DType::kBF16, {3, kC}), wv, nullptr);
  EXPECT_NE(s.ToString().find("overlaps state"), std::string::npos) << s.ToString();
  s = CausalConv1dSiluStep(ov, TensorView(hist.data(), DType::kBF16, {4, kC}), xv,
                           TensorView(state.data(), DType::kBF16, {2, kC}), wv, nullptr);
  EXPECT_NE(s.ToString().find("state"), std::string::npos) << s.ToString();
}

struct Rule {
  int64_t hk = 2, hv = 6, dk = 5, dv = 7, t = kT;
  std::vector<bf16> q, k, v;
  std::vector<float> g, beta;
  Rule() {
    q = testing::RandomBf16(t * hk * dk, 11);
    k = testing::RandomBf16(t * hk * dk, 12);
    v = testing::RandomBf16(t * hv * dv, 13);
    g = testing::RandomFloats(t * hv, 14, -1.5f, -0.01f);
    beta = testing::RandomFloats(t * hv, 15, 0.05f, 0.95f);
  }
  // Tokens [from, from + n) writing `out` rows (f32 [n, hv*dv], or null).
  GatedDeltaRuleArgs Args(int64_t from, int64_t n, float* out) {
    GatedDeltaRuleArgs a;
    a.q = TensorView(q.data() + from * hk * dk, DType::kBF16, {n, hk * dk});
    a.k = TensorView(k.data() + from * hk * dk, DType::kBF16, {n, hk * dk});
    a.v = TensorView(v.data() + from * hv * dv, DType::kBF16, {n, hv * dv});
    a.g = TensorView(g.data() + from * hv, DType::kF32, {n, hv});
    a.beta = TensorView(beta.data() + from * hv, DType::kF32, {n, hv});
    if (out != nullptr) a.out = TensorView(out, DType::kF32, {n, hv * dv});
    a.key_heads = hk;
    a.value_heads = hv;
    a.key_dim = dk;
    a.value_dim = dv;
    return a;
  }
  TensorView State(std::vector<float>& s) {
    return TensorView(s.data(), DType::kF32, {hv, dk, dv});
  }
};

TEST(GatedDeltaRuleStep, SplitCallsAreBitwiseOneCallAndCloseToTheReference) {
  Rule r;
  const int64_t plane = r.hv * r.dk * r.dv, width = r.hv * r.dv;
  std::vector<float> zero(plane, 0.f), whole_state(plane), whole(r.t * width);
  GatedDeltaRuleStepArgs one{r.Args(0, r.t, whole.data()), r.State(zero), r.State(whole_state)};
  ASSERT_TRUE(GatedDeltaRuleStep(one, nullptr).ok());

  // 4 + 1 + 8 tokens, in place (state_in == state_out).
  std::vector<float> state(plane, 0.f), split(r.t * width);
  int64_t at = 0;
  for (int64_t n : {4, 1, 8}) {
    GatedDeltaRuleStepArgs a{r.Args(at, n, split.data() + at * width), r.State(state),
                             r.State(state)};
    const Status st = GatedDeltaRuleStep(a, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    at += n;
  }
  EXPECT_EQ(split, whole);
  EXPECT_EQ(state, whole_state);

  // A replay (no outputs) of the first 5 tokens, then the rest: the same state.
  std::vector<float> replay(plane);
  GatedDeltaRuleStepArgs a{r.Args(0, 5, nullptr), r.State(zero), r.State(replay)};
  ASSERT_TRUE(GatedDeltaRuleStep(a, nullptr).ok());
  a = {r.Args(5, r.t - 5, nullptr), r.State(replay), r.State(replay)};
  ASSERT_TRUE(GatedDeltaRuleStep(a, nullptr).ok());
  EXPECT_EQ(replay, whole_state);

  // Against the float64 reference over the same tokens as one document.
  std::vector<float> ref(r.t * width);
  std::vector<int32_t> cu = {0, static_cast<int32_t>(r.t)};
  GatedDeltaRuleArgs ra = r.Args(0, r.t, ref.data());
  ra.cu_seqlens = TensorView(cu.data(), DType::kI32, {2});
  ASSERT_TRUE(GatedDeltaRuleForward(ra, nullptr).ok());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    worst = std::max(worst, std::fabs(double(whole[i]) - ref[i]));
    scale = std::max(scale, std::fabs(double(ref[i])));
  }
  EXPECT_GT(scale, 0.05);
  EXPECT_LT(worst, 1e-5 * scale) << "fp32 state rounding only";

  // Sensitivity: a different start state changes the outputs.
  std::vector<float> other(plane, 0.01f), moved(r.t * width), sink(plane);
  a = {r.Args(0, r.t, moved.data()), r.State(other), r.State(sink)};
  ASSERT_TRUE(GatedDeltaRuleStep(a, nullptr).ok());
  EXPECT_NE(moved, whole);
}

TEST(GatedDeltaRuleStep, RefusesBadArguments) {
  Rule r;
  std::vector<float> s(r.hv * r.dk * r.dv), out(r.t * r.hv * r.dv);
  GatedDeltaRuleStepArgs a{r.Args(0, r.t, out.data()), r.State(s),
                           TensorView(s.data(), DType::kF32, {r.hv, r.dv, r.dk})};
  Status st = GatedDeltaRuleStep(a, nullptr);
  EXPECT_NE(st.ToString().find("state_out"), std::string::npos) << st.ToString();
  a.state_out = r.State(s);
  a.rule.key_heads = 4;
  st = GatedDeltaRuleStep(a, nullptr);
  EXPECT_NE(st.ToString().find("multiple of key_heads"), std::string::npos) << st.ToString();
  a.rule.key_heads = r.hk;
  a.state_in = TensorView(s.data(), DType::kBF16, {r.hv, r.dk, r.dv});
  st = GatedDeltaRuleStep(a, nullptr);
  EXPECT_NE(st.ToString().find("state_in"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace tandem::kernels
