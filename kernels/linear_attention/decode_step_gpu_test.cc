// GPU test of the decode steps (decode_step.h) against their CPU twins: the delta rule step
// from a non-zero state (odd heads and the 27B layer's 16 / 48 heads of 128), in place and
// split into calls (bitwise equal to one call: the state is fp32 in registers either way),
// and the replay without outputs; the conv step's outputs (to a bf16 ulp: expf) and history
// rows (bitwise).
#include <gtest/gtest.h>

#include "kernels/linear_attention/decode_step.h"
#include "kernels/testing/gpu.h"

namespace tandem::kernels {
namespace {

using testing::RandomBf16;
using testing::RandomFloats;
using testing::ToDevice;
using testing::ToHost;

TEST(DecodeStepGpuTest, DeltaRuleStepMatchesCpuTwin) {
  struct Case {
    int64_t hk, hv, dk, dv, n;
  };
  uint64_t seed = 300;
  for (const Case c : {Case{2, 6, 5, 7, 9}, Case{16, 48, 128, 128, 16}}) {
    const int64_t qd = c.hk * c.dk, vd = c.hv * c.dv, plane = c.hv * c.dk * c.dv;
    std::vector<bf16> q = RandomBf16(c.n * qd, ++seed), k = RandomBf16(c.n * qd, ++seed),
                      v = RandomBf16(c.n * vd, ++seed);
    std::vector<float> g = RandomFloats(c.n * c.hv, ++seed, -1.5f, -0.01f),
                       beta = RandomFloats(c.n * c.hv, ++seed, 0.05f, 0.95f),
                       s0 = RandomFloats(plane, ++seed, -0.2f, 0.2f);
    auto args = [&](TensorView qv, TensorView kv, TensorView vv, TensorView gv, TensorView bv,
                    int64_t from, int64_t n, TensorView out, TensorView in, TensorView st) {
      GatedDeltaRuleStepArgs a;
      a.rule.q = qv.Narrow(0, from, n);
      a.rule.k = kv.Narrow(0, from, n);
      a.rule.v = vv.Narrow(0, from, n);
      a.rule.g = gv.Narrow(0, from, n);
      a.rule.beta = bv.Narrow(0, from, n);
      a.rule.out = out.empty() ? out : out.Narrow(0, from, n);
      a.rule.key_heads = c.hk;
      a.rule.value_heads = c.hv;
      a.rule.key_dim = c.dk;
      a.rule.value_dim = c.dv;
      a.state_in = in;
      a.state_out = st;
      return a;
    };
    std::vector<float> want(c.n * vd), want_state(plane);
    ASSERT_TRUE(
        GatedDeltaRuleStep(args(TensorView(q.data(), DType::kBF16, {c.n, qd}),
                                TensorView(k.data(), DType::kBF16, {c.n, qd}),
                                TensorView(v.data(), DType::kBF16, {c.n, vd}),
                                TensorView(g.data(), DType::kF32, {c.n, c.hv}),
                                TensorView(beta.data(), DType::kF32, {c.n, c.hv}), 0, c.n,
                                TensorView(want.data(), DType::kF32, {c.n, vd}),
                                TensorView(s0.data(), DType::kF32, {c.hv, c.dk, c.dv}),
                                TensorView(want_state.data(), DType::kF32, {c.hv, c.dk, c.dv})),
                           nullptr)
            .ok());
    Tensor gq = ToDevice(q, DType::kBF16, {c.n, qd}), gk = ToDevice(k, DType::kBF16, {c.n, qd}),
           gv = ToDevice(v, DType::kBF16, {c.n, vd}), gg = ToDevice(g, DType::kF32, {c.n, c.hv}),
           gb = ToDevice(beta, DType::kF32, {c.n, c.hv});
    Tensor in = ToDevice(s0, DType::kF32, {c.hv, c.dk, c.dv});
    Tensor st = Tensor::Empty(testing::Pool(), DType::kF32, {c.hv, c.dk, c.dv}).value();
    Tensor out = Tensor::Empty(testing::Pool(), DType::kF32, {c.n, vd}).value();
    Status s = GatedDeltaRuleStep(args(gq, gk, gv, gg, gb, 0, c.n, out, in, st), nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(testing::AllClose(ToHost<float>(out), want, 1e-4, 1e-3, "out")) << c.hv;
    EXPECT_TRUE(testing::AllClose(ToHost<float>(st), want_state, 1e-4, 1e-3, "state")) << c.hv;

    // In place, split 2 + rest, and a replay without outputs: bitwise the one call.
    Tensor split = ToDevice(s0, DType::kF32, {c.hv, c.dk, c.dv});
    Tensor out2 = Tensor::Empty(testing::Pool(), DType::kF32, {c.n, vd}).value();
    ASSERT_TRUE(
        GatedDeltaRuleStep(args(gq, gk, gv, gg, gb, 0, 2, out2, split, split), nullptr).ok());
    ASSERT_TRUE(
        GatedDeltaRuleStep(args(gq, gk, gv, gg, gb, 2, c.n - 2, out2, split, split), nullptr).ok());
    EXPECT_EQ(ToHost<float>(out2), ToHost<float>(out));
    EXPECT_EQ(ToHost<float>(split), ToHost<float>(st));
    Tensor replay = Tensor::Empty(testing::Pool(), DType::kF32, {c.hv, c.dk, c.dv}).value();
    ASSERT_TRUE(GatedDeltaRuleStep(args(gq, gk, gv, gg, gb, 0, c.n, {}, in, replay), nullptr).ok());
    EXPECT_EQ(ToHost<float>(replay), ToHost<float>(st));
  }
}

TEST(DecodeStepGpuTest, ConvStepMatchesCpuTwin) {
  const int64_t c = 10240 + 37, k = 4, n = 5, r = k - 1 + n;
  std::vector<bf16> x = RandomBf16(n * (c + 8), 401), state = RandomBf16((k - 1) * c, 402),
                    w = RandomBf16(c * k, 403);
  std::vector<bf16> want(n * c), want_hist(r * c);
  auto xs = [&](TensorView all) { return all.Narrow(1, 0, c); };
  ASSERT_TRUE(CausalConv1dSiluStep(TensorView(want.data(), DType::kBF16, {n, c}),
                                   TensorView(want_hist.data(), DType::kBF16, {r, c}),
                                   xs(TensorView(x.data(), DType::kBF16, {n, c + 8})),
                                   TensorView(state.data(), DType::kBF16, {k - 1, c}),
                                   TensorView(w.data(), DType::kBF16, {c, k}), nullptr)
                  .ok());
  Tensor gx = ToDevice(x, DType::kBF16, {n, c + 8}), gs = ToDevice(state, DType::kBF16, {k - 1, c}),
         gw = ToDevice(w, DType::kBF16, {c, k});
  Tensor out = Tensor::Empty(testing::Pool(), DType::kBF16, {n, c}).value();
  Tensor hist = Tensor::Empty(testing::Pool(), DType::kBF16, {r, c}).value();
  const Status s = CausalConv1dSiluStep(out, hist, xs(gx), gs, gw, nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(testing::AllClose(ToHost<bf16>(out), want, 1e-3, testing::kOneBf16UlpRtol, "out"));
  const std::vector<bf16> got_hist = ToHost<bf16>(hist);
  for (size_t i = 0; i < got_hist.size(); ++i) ASSERT_EQ(got_hist[i].bits, want_hist[i].bits) << i;
}

}  // namespace
}  // namespace tandem::kernels
