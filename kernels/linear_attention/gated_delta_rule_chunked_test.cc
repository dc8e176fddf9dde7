// The chunked gated delta rule's CPU twin (float64 chunk algebra, the CUDA kernel's
// algorithm) against the recurrent CPU reference: odd document lengths, documents shorter
// than a chunk, exactly one chunk, one token, many documents, strided rows, GQA heads, and
// chunk sizes 64 (the kernel's), 16 and 1 (the recurrence itself). Plus the refusals.
#include "kernels/linear_attention/gated_delta_rule_chunked.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/testing/testing.h"

namespace tandem::kernels {
namespace {

struct Data {
  int64_t hk, hv, dk, dv, pad;
  std::vector<int32_t> cu{0};
  std::vector<bf16> q{}, k{}, v{};  // {}: Data{hk, hv, dk, dv, pad} sets the sizes only
  std::vector<float> g{}, beta{};
  int64_t T() const { return cu.back(); }
  GatedDeltaRuleArgs Args(std::vector<float>& out) {
    const int64_t t = T(), qs = hk * dk + pad, vs = hv * dv + pad;
    GatedDeltaRuleArgs a;
    a.q = TensorView(q.data(), DType::kBF16, {t, qs}).Narrow(1, 0, hk * dk);
    a.k = TensorView(k.data(), DType::kBF16, {t, qs}).Narrow(1, 0, hk * dk);
    a.v = TensorView(v.data(), DType::kBF16, {t, vs}).Narrow(1, 0, hv * dv);
    a.g = TensorView(g.data(), DType::kF32, {t, hv});
    a.beta = TensorView(beta.data(), DType::kF32, {t, hv});
    a.cu_seqlens = TensorView(cu.data(), DType::kI32, {static_cast<int64_t>(cu.size())});
    out.assign(static_cast<size_t>(t * hv * dv), 0.f);
    a.out = TensorView(out.data(), DType::kF32, {t, hv * dv});
    a.key_heads = hk;
    a.value_heads = hv;
    a.key_dim = dk;
    a.value_dim = dv;
    return a;
  }
};

Data Make(int64_t hk, int64_t hv, int64_t dk, int64_t dv, int64_t pad,
          const std::vector<int32_t>& lens, uint64_t seed) {
  Data d{hk, hv, dk, dv, pad};
  for (int32_t l : lens) d.cu.push_back(d.cu.back() + l);
  const int64_t t = d.T();
  d.q = testing::RandomBf16(t * (hk * dk + pad), seed);
  d.k = testing::RandomBf16(t * (hk * dk + pad), seed + 1);
  d.v = testing::RandomBf16(t * (hv * dv + pad), seed + 2);
  d.g = testing::RandomFloats(t * hv, seed + 3, -1.5f, -0.01f);
  d.beta = testing::RandomFloats(t * hv, seed + 4, 0.05f, 0.95f);
  return d;
}

TEST(GatedDeltaRuleChunkedTest, TwinMatchesTheRecurrenceOnOddShapes) {
  struct Case {
    int64_t hk, hv, dk, dv, pad;
    std::vector<int32_t> lens;
  };
  const Case cases[] = {
      {1, 1, 8, 8, 0, {37}},
      {2, 6, 16, 24, 3, {130, 1, 63, 64, 65}},
      {2, 4, 12, 20, 0, {5, 33, 2, 17, 1, 40, 9, 3, 3, 11, 70}},
      {1, 3, 32, 16, 5, {200}},
  };
  uint64_t seed = 7;
  for (const Case& c : cases) {
    for (int64_t chunk : {int64_t{64}, int64_t{16}, int64_t{1}}) {
      Data d = Make(c.hk, c.hv, c.dk, c.dv, c.pad, c.lens, seed += 10);
      std::vector<float> want, got;
      ASSERT_TRUE(cpu::GatedDeltaRuleForward(d.Args(want), nullptr).ok());
      const Status st = cpu::GatedDeltaRuleChunkedForward(d.Args(got), chunk, nullptr);
      ASSERT_TRUE(st.ok()) << st.ToString();
      // Both float64, rounded once to f32: any algebra slip is far above 1e-5.
      EXPECT_TRUE(testing::AllClose(got, want, 1e-5, 1e-5, "out"))
          << "chunk " << chunk << " dk " << c.dk << " dv " << c.dv << " docs " << c.lens.size();
    }
  }
}

TEST(GatedDeltaRuleChunkedTest, DispatchRunsTheTwinOnTheCpuAndRefusesBadChunks) {
  Data d = Make(1, 2, 16, 16, 0, {70, 3}, 99);
  std::vector<float> want, got;
  ASSERT_TRUE(cpu::GatedDeltaRuleForward(d.Args(want), nullptr).ok());
  ASSERT_TRUE(GatedDeltaRuleChunkedForward(d.Args(got), TensorView(), nullptr).ok());
  EXPECT_TRUE(testing::AllClose(got, want, 1e-5, 1e-5, "out"));
  const Status st = cpu::GatedDeltaRuleChunkedForward(d.Args(got), 0, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("chunk must be >= 1"), std::string::npos) << st.ToString();
  EXPECT_TRUE(GatedDeltaRuleChunkedSupports(128, 128));
  EXPECT_FALSE(GatedDeltaRuleChunkedSupports(64, 128));
  // T diag(beta) and Q K^T rows (bf16 [hv][T][64] each), q's and k's inverse norms
  // (f32 [hk][T]), gc (f32 [hv][T]), each section rounded up to 256 bytes.
  EXPECT_EQ(GatedDeltaRuleChunkedWorkspaceBytes(100, 16, 48, 128, 128),
            2 * 614400 + 2 * 6400 + 19200);
  EXPECT_EQ(GatedDeltaRuleChunkedWorkspaceBytes(3, 1, 3, 128, 128), 2 * 1280 + 2 * 256 + 256);
}

}  // namespace
}  // namespace tandem::kernels
