// The gated delta rule's CPU reference (recurrent, float64) against an independent chunked
// WY / UT-transform form in float64 (the algorithm the CUDA kernel will use), on odd
// document lengths, documents shorter than one chunk, many documents and strided inputs;
// plus a closed form for one token, the value-head -> key-head mapping, and document
// independence.
#include "kernels/linear_attention/gated_delta_rule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/core/memory.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels {
namespace {

using testing::AllClose;

struct Problem {
  int64_t hk, hv, dk, dv, row_pad;  // row_pad: extra columns in each q/k/v row (strided views)
  std::vector<int32_t> cu;
  std::vector<bf16> q, k, v;  // [T, hk*dk + pad] ...
  std::vector<float> g, beta;
  int64_t T() const { return cu.back(); }
  int64_t qs() const { return hk * dk + row_pad; }
  int64_t vs() const { return hv * dv + row_pad; }
};

Problem MakeProblem(int64_t hk, int64_t hv, int64_t dk, int64_t dv, std::vector<int32_t> lens,
                    uint64_t seed, int64_t row_pad = 0) {
  Problem p{hk, hv, dk, dv, row_pad, {0}, {}, {}, {}, {}, {}};
  for (int32_t l : lens) p.cu.push_back(p.cu.back() + l);
  const int64_t t = p.T();
  p.q = testing::RandomBf16(t * p.qs(), seed);
  p.k = testing::RandomBf16(t * p.qs(), seed + 1);
  p.v = testing::RandomBf16(t * p.vs(), seed + 2);
  p.g = testing::RandomFloats(t * hv, seed + 3, -1.5f, -0.01f);
  p.beta = testing::RandomFloats(t * hv, seed + 4, 0.05f, 0.95f);
  return p;
}

TensorView Rows(std::vector<bf16>& data, int64_t t, int64_t stride, int64_t cols) {
  return TensorView(data.data(), DType::kBF16, {t, stride}).Narrow(1, 0, cols);
}

std::vector<float> RunCpu(Problem& p) {
  const int64_t t = p.T();
  std::vector<float> out(static_cast<size_t>(t * p.hv * p.dv));
  GatedDeltaRuleArgs a;
  a.q = Rows(p.q, t, p.qs(), p.hk * p.dk);
  a.k = Rows(p.k, t, p.qs(), p.hk * p.dk);
  a.v = Rows(p.v, t, p.vs(), p.hv * p.dv);
  a.g = TensorView(p.g.data(), DType::kF32, {t, p.hv});
  a.beta = TensorView(p.beta.data(), DType::kF32, {t, p.hv});
  a.cu_seqlens = TensorView(p.cu.data(), DType::kI32, {static_cast<int64_t>(p.cu.size())});
  a.out = TensorView(out.data(), DType::kF32, {t, p.hv * p.dv});
  a.key_heads = p.hk;
  a.value_heads = p.hv;
  a.key_dim = p.dk;
  a.value_dim = p.dv;
  const Status st = GatedDeltaRuleForward(a, nullptr);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

using Mat = std::vector<std::vector<double>>;
Mat Zeros(int64_t r, int64_t c) { return Mat(r, std::vector<double>(c, 0.0)); }

// The chunked form for one document and value head, float64. Within a chunk of length L
// with cumulative log decay G_i: A[i][j] = beta_i (k_i . k_j) exp(G_i - G_j) for j < i;
// (I + A) U = beta V and (I + A) W = beta K exp(G) (forward substitution); then
// V' = U - W S, O = (Q exp(G)) S + (causal (Q K^T) exp(G_i - G_j)) V', and
// S <- exp(G_L) S + (K exp(G_L - G))^T V'.
void ChunkedHead(const Problem& p, int64_t begin, int64_t end, int64_t vh, int64_t chunk,
                 std::vector<double>* out) {
  const int64_t dk = p.dk, dv = p.dv, kh = vh / (p.hv / p.hk);
  Mat s = Zeros(dk, dv);
  auto head = [&](const std::vector<bf16>& x, int64_t t, double scale) {
    std::vector<double> h(dk);
    double ss = 0;
    for (int64_t i = 0; i < dk; ++i) {
      h[i] = x[t * p.qs() + kh * dk + i].f();
      ss += h[i] * h[i];
    }
    for (double& e : h) e *= scale / std::sqrt(ss + 1e-6);
    return h;
  };
  for (int64_t c0 = begin; c0 < end; c0 += chunk) {
    const int64_t l = std::min(chunk, end - c0);
    Mat q(l), k(l), u = Zeros(l, dv), w = Zeros(l, dk);
    std::vector<double> gc(l), beta(l);
    for (int64_t i = 0; i < l; ++i) {
      q[i] = head(p.q, c0 + i, 1.0 / std::sqrt(static_cast<double>(dk)));
      k[i] = head(p.k, c0 + i, 1.0);
      gc[i] = (i ? gc[i - 1] : 0.0) + p.g[(c0 + i) * p.hv + vh];
      beta[i] = p.beta[(c0 + i) * p.hv + vh];
    }
    auto dot = [](const std::vector<double>& a, const std::vector<double>& b) {
      double r = 0;
      for (size_t i = 0; i < a.size(); ++i) r += a[i] * b[i];
      return r;
    };
    for (int64_t i = 0; i < l; ++i) {  // forward substitution of (I + A)
      for (int64_t j = 0; j < dv; ++j) u[i][j] = beta[i] * p.v[(c0 + i) * p.vs() + vh * dv + j].f();
      for (int64_t j = 0; j < dk; ++j) w[i][j] = beta[i] * k[i][j] * std::exp(gc[i]);
      for (int64_t m = 0; m < i; ++m) {
        const double aim = beta[i] * dot(k[i], k[m]) * std::exp(gc[i] - gc[m]);
        for (int64_t j = 0; j < dv; ++j) u[i][j] -= aim * u[m][j];
        for (int64_t j = 0; j < dk; ++j) w[i][j] -= aim * w[m][j];
      }
    }
    Mat vnew = u;
    for (int64_t i = 0; i < l; ++i)
      for (int64_t a = 0; a < dk; ++a)
        for (int64_t j = 0; j < dv; ++j) vnew[i][j] -= w[i][a] * s[a][j];
    for (int64_t i = 0; i < l; ++i) {
      for (int64_t j = 0; j < dv; ++j) {
        double o = 0;
        for (int64_t a = 0; a < dk; ++a) o += q[i][a] * std::exp(gc[i]) * s[a][j];
        for (int64_t m = 0; m <= i; ++m)
          o += dot(q[i], k[m]) * std::exp(gc[i] - gc[m]) * vnew[m][j];
        (*out)[(c0 + i) * p.hv * dv + vh * dv + j] = o;
      }
    }
    for (int64_t a = 0; a < dk; ++a)
      for (int64_t j = 0; j < dv; ++j) {
        s[a][j] *= std::exp(gc[l - 1]);
        for (int64_t m = 0; m < l; ++m)
          s[a][j] += k[m][a] * std::exp(gc[l - 1] - gc[m]) * vnew[m][j];
      }
  }
}

std::vector<double> Chunked(const Problem& p, int64_t chunk) {
  std::vector<double> out(static_cast<size_t>(p.T() * p.hv * p.dv));
  for (size_t d = 0; d + 1 < p.cu.size(); ++d)
    for (int64_t vh = 0; vh < p.hv; ++vh) ChunkedHead(p, p.cu[d], p.cu[d + 1], vh, chunk, &out);
  return out;
}

struct Case {
  int64_t hk, hv, dk, dv, pad, chunk;
  std::vector<int32_t> lens;
};

TEST(GatedDeltaRuleTest, RecurrentMatchesChunkedForm) {
  const Case cases[] = {
      {1, 1, 8, 8, 0, 64, {37}},
      {2, 6, 16, 8, 3, 64, {130, 1, 63, 64, 65}},       // chunk edges, a single token
      {2, 4, 12, 20, 0, 16, {5, 33, 2, 17, 1, 40, 9}},  // many documents, several chunks each
      {3, 3, 32, 16, 5, 64, {200}},
  };
  uint64_t seed = 10;
  for (const Case& c : cases) {
    Problem p = MakeProblem(c.hk, c.hv, c.dk, c.dv, c.lens, seed += 10, c.pad);
    const std::vector<float> got = RunCpu(p);
    const std::vector<double> want = Chunked(p, c.chunk);
    const std::vector<double> gotd(got.begin(), got.end());
    EXPECT_TRUE(AllClose(gotd, want, 1e-5, 1e-4, "out")) << "hv " << c.hv << " dk " << c.dk;
  }
}

TEST(GatedDeltaRuleTest, OneTokenClosedForm) {
  // One token: S = k (beta v)^T, so o = beta (q^ . k^) dk^-1/2 v with q^, k^ unit vectors.
  Problem p = MakeProblem(1, 1, 4, 3, {1}, 7);
  const std::vector<float> got = RunCpu(p);
  double qq = 0, kk = 0, qk = 0;
  for (int i = 0; i < 4; ++i) {
    qq += p.q[i].f() * p.q[i].f();
    kk += p.k[i].f() * p.k[i].f();
    qk += p.q[i].f() * p.k[i].f();
  }
  const double f = p.beta[0] * qk / std::sqrt((qq + 1e-6) * (kk + 1e-6)) / 2.0;
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(got[j], f * p.v[j].f(), 1e-6);
}

TEST(GatedDeltaRuleTest, ValueHeadJUsesKeyHeadJOverGroup) {
  // hk 2, hv 4: value heads 2 and 3 read key head 1. Zero key head 1's q: their outputs
  // vanish and those of value heads 0 and 1 do not.
  Problem p = MakeProblem(2, 4, 8, 4, {9, 4}, 3);
  for (int64_t t = 0; t < p.T(); ++t)
    for (int64_t i = 0; i < p.dk; ++i) p.q[t * p.qs() + p.dk + i] = bf16(0.f);
  const std::vector<float> got = RunCpu(p);
  for (int64_t t = 0; t < p.T(); ++t) {
    double norm[4] = {0, 0, 0, 0};
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t j = 0; j < p.dv; ++j) norm[h] += std::abs(got[t * 16 + h * 4 + j]);
    EXPECT_GT(norm[0] + norm[1], 1e-4) << "token " << t;
    EXPECT_EQ(norm[2] + norm[3], 0.0) << "token " << t;
  }
}

TEST(GatedDeltaRuleTest, DocumentsAreIndependent) {
  Problem packed = MakeProblem(2, 4, 8, 8, {20, 45, 3}, 21);
  const std::vector<float> all = RunCpu(packed);
  // The second document alone, cut out of the same data.
  Problem alone = packed;
  const int64_t b = packed.cu[1], e = packed.cu[2];
  alone.cu = {0, static_cast<int32_t>(e - b)};
  alone.q.assign(packed.q.begin() + b * packed.qs(), packed.q.begin() + e * packed.qs());
  alone.k.assign(packed.k.begin() + b * packed.qs(), packed.k.begin() + e * packed.qs());
  alone.v.assign(packed.v.begin() + b * packed.vs(), packed.v.begin() + e * packed.vs());
  alone.g.assign(packed.g.begin() + b * 4, packed.g.begin() + e * 4);
  alone.beta.assign(packed.beta.begin() + b * 4, packed.beta.begin() + e * 4);
  const std::vector<float> one = RunCpu(alone);
  const std::vector<float> slice(all.begin() + b * 32, all.begin() + e * 32);
  EXPECT_EQ(one, slice);
}

TEST(GatedDeltaRuleTest, RejectsBadArguments) {
  Problem p = MakeProblem(2, 3, 4, 4, {3}, 1);  // 3 value heads are not a multiple of 2
  std::vector<float> out(3 * 12);
  GatedDeltaRuleArgs a;
  a.q = Rows(p.q, 3, p.qs(), 8);
  a.k = Rows(p.k, 3, p.qs(), 8);
  a.v = Rows(p.v, 3, p.vs(), 12);
  a.g = TensorView(p.g.data(), DType::kF32, {3, 3});
  a.beta = TensorView(p.beta.data(), DType::kF32, {3, 3});
  a.cu_seqlens = TensorView(p.cu.data(), DType::kI32, {2});
  a.out = TensorView(out.data(), DType::kF32, {3, 12});
  a.key_heads = 2;
  a.value_heads = 3;
  a.key_dim = 4;
  a.value_dim = 4;
  Status st = GatedDeltaRuleForward(a, nullptr);
  EXPECT_NE(st.message().find("multiple of key_heads"), std::string::npos) << st.ToString();
  a.key_heads = 1;
  a.q = Rows(p.q, 3, p.qs(), 4);
  a.k = Rows(p.k, 3, p.qs(), 4);
  p.cu[1] = 2;  // does not end at T
  st = GatedDeltaRuleForward(a, nullptr);
  EXPECT_NE(st.message().find("cu_seqlens"), std::string::npos) << st.ToString();
  p.cu[1] = 3;
  EXPECT_TRUE(GatedDeltaRuleForward(a, nullptr).ok());
  a.g = TensorView(p.g.data(), DType::kBF16, {3, 3});
  st = GatedDeltaRuleForward(a, nullptr);
  EXPECT_NE(st.message().find("g:"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace tandem::kernels
