// GPU test of the gated delta rule: the CUDA recurrent kernel (fp32) against the CPU float64
// reference on odd document lengths, a single-token document, many documents, strided rows,
// and the 27B layer's heads (16 key / 48 value heads of 128).
#include <gtest/gtest.h>

#include "kernels/linear_attention/gated_delta_rule.h"
#include "kernels/testing/gpu.h"

namespace tandem::kernels {
namespace {

using testing::RandomBf16;
using testing::RandomFloats;
using testing::ToDevice;
using testing::ToHost;

struct Case {
  int64_t hk, hv, dk, dv, pad;
  std::vector<int32_t> lens;
};

TEST(GatedDeltaRuleGpuTest, RecurrentKernelMatchesCpuReference) {
  const Case cases[] = {
      {1, 1, 8, 8, 0, {37}},
      {2, 6, 16, 24, 3, {130, 1, 63, 64, 65}},
      {2, 4, 12, 20, 0, {5, 33, 2, 17, 1, 40, 9, 3, 3, 11, 70}},
      {16, 48, 128, 128, 0, {300, 1, 77}},
  };
  uint64_t seed = 100;
  for (const Case& c : cases) {
    std::vector<int32_t> cu = {0};
    for (int32_t l : c.lens) cu.push_back(cu.back() + l);
    const int64_t t = cu.back(), qs = c.hk * c.dk + c.pad, vs = c.hv * c.dv + c.pad;
    const std::vector<bf16> q = RandomBf16(t * qs, ++seed), k = RandomBf16(t * qs, ++seed),
                            v = RandomBf16(t * vs, ++seed);
    const std::vector<float> g = RandomFloats(t * c.hv, ++seed, -1.5f, -0.01f),
                             beta = RandomFloats(t * c.hv, ++seed, 0.05f, 0.95f);
    std::vector<float> want(t * c.hv * c.dv);
    auto args = [&](TensorView qv, TensorView kv, TensorView vv, TensorView gv, TensorView bv,
                    TensorView cuv, TensorView out) {
      GatedDeltaRuleArgs a;
      a.q = qv.Narrow(1, 0, c.hk * c.dk);
      a.k = kv.Narrow(1, 0, c.hk * c.dk);
      a.v = vv.Narrow(1, 0, c.hv * c.dv);
      a.g = gv;
      a.beta = bv;
      a.cu_seqlens = cuv;
      a.out = out;
      a.key_heads = c.hk;
      a.value_heads = c.hv;
      a.key_dim = c.dk;
      a.value_dim = c.dv;
      return a;
    };
    const int64_t ncu = static_cast<int64_t>(cu.size());
    ASSERT_TRUE(GatedDeltaRuleForward(
                    args(TensorView(const_cast<bf16*>(q.data()), DType::kBF16, {t, qs}),
                         TensorView(const_cast<bf16*>(k.data()), DType::kBF16, {t, qs}),
                         TensorView(const_cast<bf16*>(v.data()), DType::kBF16, {t, vs}),
                         TensorView(const_cast<float*>(g.data()), DType::kF32, {t, c.hv}),
                         TensorView(const_cast<float*>(beta.data()), DType::kF32, {t, c.hv}),
                         TensorView(cu.data(), DType::kI32, {ncu}),
                         TensorView(want.data(), DType::kF32, {t, c.hv * c.dv})),
                    nullptr)
                    .ok());
    Tensor gq = ToDevice(q, DType::kBF16, {t, qs}), gk = ToDevice(k, DType::kBF16, {t, qs}),
           gv = ToDevice(v, DType::kBF16, {t, vs}), gg = ToDevice(g, DType::kF32, {t, c.hv}),
           gb = ToDevice(beta, DType::kF32, {t, c.hv}), gcu = ToDevice(cu, DType::kI32, {ncu});
    Tensor out = Tensor::Empty(testing::Pool(), DType::kF32, {t, c.hv * c.dv}).value();
    const Status st = GatedDeltaRuleForward(args(gq, gk, gv, gg, gb, gcu, out), nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    // fp32 state against float64: the state is a contraction (|S| stays O(|v|)), so the error
    // stays near fp32 rounding of the dot products over dk terms.
    EXPECT_TRUE(testing::AllClose(ToHost<float>(out), want, 1e-4, 1e-3, "out"))
        << "hv " << c.hv << " dk " << c.dk << " dv " << c.dv;
  }
}

}  // namespace
}  // namespace tandem::kernels
