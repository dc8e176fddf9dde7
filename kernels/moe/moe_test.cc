// CPU tests of the MoE ops against float64 definitions: the router (ties, top-k == E, both
// logit dtypes, renormalisation), the permutation (experts without tokens, one expert taking
// every token), the combine with and without the shared expert, the expert loop, and the
// argument checks.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/moe/combine.h"
#include "kernels/moe/experts.h"
#include "kernels/moe/moe_testing.h"
#include "kernels/moe/routing.h"

namespace tandem::kernels {
namespace {

template <typename T>
TensorView View(std::vector<T>& v, DType dtype, Shape shape) {
  return TensorView(v.data(), dtype, shape);
}

void CheckRouter(int64_t t, int64_t e, int64_t k, bool normalize, uint64_t seed) {
  std::vector<float> logits = testing::RandomFloats(t * e, seed, -3, 3);
  logits[1 % e] = logits[0];  // a tie: the lower index must come first
  std::vector<int32_t> ids(t * k);
  std::vector<float> w(t * k);
  ASSERT_TRUE(cpu::MoeRouterForward(View(ids, DType::kI32, {t, k}), View(w, DType::kF32, {t, k}),
                                    View(logits, DType::kF32, {t, e}), normalize, nullptr)
                  .ok());
  for (int64_t r = 0; r < t; ++r) {
    std::vector<int32_t> want_ids;
    std::vector<double> want_w;
    testing::RouteRef(std::vector<double>(logits.begin() + r * e, logits.begin() + (r + 1) * e),
                      k, normalize, &want_ids, &want_w);
    for (int64_t j = 0; j < k; ++j) {
      EXPECT_EQ(ids[r * k + j], want_ids[j]) << "token " << r << " slot " << j;
      EXPECT_NEAR(w[r * k + j], want_w[j], 1e-6) << "token " << r << " slot " << j;
    }
  }
}

TEST(MoeRouterTest, MatchesFloat64Definition) {
  CheckRouter(9, 16, 4, true, 1);
  CheckRouter(9, 16, 4, false, 2);
  CheckRouter(5, 7, 7, true, 3);     // top-k == expert count: weights sum to 1
  CheckRouter(5, 7, 7, false, 4);    // ... and are the softmax itself
  CheckRouter(3, 300, 8, true, 5);   // many experts
  CheckRouter(4, 1, 1, true, 6);     // a single expert
}

TEST(MoeRouterTest, Bf16LogitsAndErrors) {
  const int64_t t = 3, e = 6, k = 2;
  std::vector<bf16> logits = testing::RandomBf16(t * e, 7, -2, 2);
  std::vector<float> f32(t * e);
  for (int64_t i = 0; i < t * e; ++i) f32[i] = logits[i].f();
  std::vector<int32_t> ids(t * k), ids32(t * k);
  std::vector<float> w(t * k), w32(t * k);
  ASSERT_TRUE(MoeRouterForward(View(ids, DType::kI32, {t, k}), View(w, DType::kF32, {t, k}),
                               View(logits, DType::kBF16, {t, e}), true, nullptr)
                  .ok());
  ASSERT_TRUE(MoeRouterForward(View(ids32, DType::kI32, {t, k}), View(w32, DType::kF32, {t, k}),
                               View(f32, DType::kF32, {t, e}), true, nullptr)
                  .ok());
  EXPECT_EQ(ids, ids32);
  EXPECT_EQ(w, w32);
  // top-k above the expert count.
  std::vector<int32_t> big_ids(t * 7);
  std::vector<float> big_w(t * 7);
  const Status st = MoeRouterForward(View(big_ids, DType::kI32, {t, 7}),
                                     View(big_w, DType::kF32, {t, 7}),
                                     View(f32, DType::kF32, {t, e}), true, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("top-k 7"), std::string::npos) << st.message();
}

// Checks the permutation's invariants for `ids` [t, k] over e experts.
void CheckPermute(std::vector<int32_t> ids, int64_t t, int64_t k, int64_t e) {
  const int64_t n = t * k;
  std::vector<int32_t> offsets(e + 1), perm(n), rows(n);
  ASSERT_TRUE(MoePermute(View(offsets, DType::kI32, {e + 1}), View(perm, DType::kI32, {n}),
                         View(rows, DType::kI32, {n}), View(ids, DType::kI32, {t, k}), nullptr)
                  .ok());
  EXPECT_EQ(offsets[0], 0);
  EXPECT_EQ(offsets[e], n);
  std::vector<int32_t> seen(n, 0);
  for (int64_t x = 0; x < e; ++x) {
    const int64_t count = std::count(ids.begin(), ids.end(), static_cast<int32_t>(x));
    EXPECT_EQ(offsets[x + 1] - offsets[x], count) << "expert " << x;
  }
  for (int64_t i = 0; i < n; ++i) {
    const int32_t r = rows[i];
    ASSERT_GE(r, offsets[ids[i]]);
    ASSERT_LT(r, offsets[ids[i] + 1]);
    EXPECT_EQ(perm[r], i / k);
    ++seen[r];
  }
  for (int64_t x = 0; x < e; ++x)  // assignment order within each expert
    for (int64_t i = 0, prev = -1; i < n; ++i)
      if (ids[i] == x) {
        EXPECT_GT(rows[i], prev);
        prev = rows[i];
      }
  for (int64_t r = 0; r < n; ++r) EXPECT_EQ(seen[r], 1) << "row " << r;
}

TEST(MoePermuteTest, GroupsByExpertInAssignmentOrder) {
  CheckPermute({3, 0, 0, 3, 5, 0, 3, 5}, 4, 2, 7);           // experts 1, 2, 4, 6 get none
  CheckPermute(std::vector<int32_t>(11, 2), 11, 1, 4);       // one expert takes every token
  std::vector<int32_t> all;                                  // top-k == expert count
  for (int t = 0; t < 5; ++t)
    for (int j = 0; j < 6; ++j) all.push_back((j * 5 + t) % 6);
  CheckPermute(all, 5, 6, 6);
}

TEST(MoePermuteTest, RejectsIdsOutOfRange) {
  std::vector<int32_t> ids = {0, 4}, offsets(5), perm(2), rows(2);
  const Status st = MoePermute(View(offsets, DType::kI32, {5}), View(perm, DType::kI32, {2}),
                               View(rows, DType::kI32, {2}), View(ids, DType::kI32, {1, 2}),
                               nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("expert 4"), std::string::npos) << st.message();
}

TEST(MoeCombineTest, WeightedInverseWithSharedExpert) {
  const int64_t t = 3, k = 2, h = 5, p = 8;
  std::vector<bf16> y = testing::RandomBf16(p * h, 11), res = testing::RandomBf16(t * h, 12),
                    shared = testing::RandomBf16(t * h, 13), out(t * h), out2(t * h);
  std::vector<int32_t> rows = {5, 0, 2, 7, 1, 3};
  std::vector<float> w = {0.7f, 0.3f, 0.5f, 0.5f, 1.f, 0.25f}, gate = {0.f, -2.f, 3.f};
  MoeCombineArgs a{View(out, DType::kBF16, {t, h}), View(res, DType::kBF16, {t, h}),
                   View(y, DType::kBF16, {p, h}), View(rows, DType::kI32, {t * k}),
                   View(w, DType::kF32, {t, k}), {}, {}, {}, {}, {}};
  ASSERT_TRUE(MoeCombine(a, nullptr).ok());
  a.out = View(out2, DType::kBF16, {t, h});
  a.shared = View(shared, DType::kBF16, {t, h});
  a.shared_gate = View(gate, DType::kF32, {t});
  ASSERT_TRUE(MoeCombine(a, nullptr).ok());
  std::vector<double> want(t * h), want2(t * h);
  for (int64_t r = 0; r < t; ++r)
    for (int64_t c = 0; c < h; ++c) {
      double acc = res[r * h + c].f();
      for (int64_t j = 0; j < k; ++j) acc += w[r * k + j] * y[rows[r * k + j] * h + c].f();
      want[r * h + c] = acc;
      want2[r * h + c] = acc + shared[r * h + c].f() / (1.0 + std::exp(-gate[r]));
    }
  EXPECT_TRUE(testing::AllClose(testing::ToDouble(out), want, 1e-6, 1.0 / 256, "out"));
  EXPECT_TRUE(testing::AllClose(testing::ToDouble(out2), want2, 1e-6, 1.0 / 256, "shared"));
  rows[3] = p;  // a row outside y
  a.assign_row = View(rows, DType::kI32, {t * k});
  EXPECT_FALSE(MoeCombine(a, nullptr).ok());
}

// The FP8 experts' raw rows: each term scaled by its row's and its expert's channel scales.
TEST(MoeCombineTest, ScalesRawRowsByRowAndExpertChannel) {
  const int64_t t = 3, k = 2, h = 5, p = 8, e = 3;
  std::vector<bf16> y = testing::RandomBf16(p * h, 14), res = testing::RandomBf16(t * h, 15),
                    out(t * h);
  std::vector<int32_t> rows = {5, 0, 2, 7, 1, 3}, ids = {2, 0, 1, 2, 0, 1};
  std::vector<float> w = {0.7f, 0.3f, 0.5f, 0.5f, 1.f, 0.25f};
  std::vector<float> row_scale = testing::RandomFloats(p, 16, 0.5f, 2.f);
  std::vector<float> channel = testing::RandomFloats(e * h, 17, 0.1f, 3.f);
  MoeCombineArgs a{View(out, DType::kBF16, {t, h}), View(res, DType::kBF16, {t, h}),
                   View(y, DType::kBF16, {p, h}), View(rows, DType::kI32, {t * k}),
                   View(w, DType::kF32, {t, k}), {}, {}, View(row_scale, DType::kF32, {p}),
                   View(channel, DType::kF32, {e, h}), View(ids, DType::kI32, {t, k})};
  ASSERT_TRUE(MoeCombine(a, nullptr).ok());
  std::vector<double> want(t * h);
  for (int64_t r = 0; r < t; ++r)
    for (int64_t c = 0; c < h; ++c) {
      double acc = res[r * h + c].f();
      for (int64_t j = 0; j < k; ++j) {
        const int32_t row = rows[r * k + j];
        acc += w[r * k + j] * y[row * h + c].f() * row_scale[row] * channel[ids[r * k + j] * h + c];
      }
      want[r * h + c] = acc;
    }
  EXPECT_TRUE(testing::AllClose(testing::ToDouble(out), want, 1e-6, 1.0 / 256, "scaled"));
  ids[4] = e;  // an expert without channel scales
  EXPECT_NE(MoeCombine(a, nullptr).message().find("names expert 3"), std::string::npos);
  a.ids = TensorView();  // the three go together
  EXPECT_FALSE(MoeCombine(a, nullptr).ok());
}

TEST(MoeExpertsTest, LoopMatchesFloat64PerExpertMlp) {
  const int64_t e = 4, h = 24, i = 10;
  const std::vector<int32_t> offsets = {0, 3, 3, 9, 10};  // expert 1 has no rows
  const int64_t n = offsets[e];
  MoeLayerShape s{h, e, 1, i, 0, true};
  testing::MoeProblem p = testing::RandomMoeProblem(s, n, 21);
  std::vector<bf16> gate_up(n * 2 * i), act(n * i), y(n * h);
  const MoeExpertWeights w{View(p.gate_up, DType::kBF16, {e, 2 * i, h}),
                           View(p.down, DType::kBF16, {e, h, i})};
  ASSERT_TRUE(MoeExpertsForward(nullptr, w, offsets, View(p.x, DType::kBF16, {n, h}),
                                View(gate_up, DType::kBF16, {n, 2 * i}),
                                View(act, DType::kBF16, {n, i}), View(y, DType::kBF16, {n, h}),
                                nullptr)
                  .ok());
  std::vector<double> want;
  for (int64_t x = 0; x < e; ++x)
    for (int32_t r = offsets[x]; r < offsets[x + 1]; ++r) {
      std::vector<double> xr(static_cast<size_t>(h));
      for (int64_t c = 0; c < h; ++c) xr[c] = p.x[r * h + c].f();
      const std::vector<double> yr =
          testing::MlpRef(p.gate_up.data() + x * 2 * i * h, p.down.data() + x * h * i, h, i, xr);
      want.insert(want.end(), yr.begin(), yr.end());
    }
  // bf16 roundings of gate_up, act and y: a few parts in 256 of the row's scale.
  EXPECT_TRUE(testing::AllClose(testing::ToDouble(y), want, 2e-2, 2e-2, "y"));
  const std::vector<int32_t> bad = {0, 3, 2, 9, 10};  // decreasing
  EXPECT_FALSE(MoeExpertsForward(nullptr, w, bad, View(p.x, DType::kBF16, {n, h}),
                                 View(gate_up, DType::kBF16, {n, 2 * i}),
                                 View(act, DType::kBF16, {n, i}), View(y, DType::kBF16, {n, h}),
                                 nullptr)
                   .ok());
}

TEST(MoeRoutingTest, PadLayoutMovesRowsToExpertSlots) {
  // 5 tokens, top-2 over 4 experts; expert 2 gets nothing.
  std::vector<int32_t> ids = {0, 1, 1, 3, 0, 3, 1, 0, 3, 1}, offsets(5), perm(10), rows(10);
  const int64_t t = 5, k = 2, e = 4, cap = 4;
  ASSERT_TRUE(cpu::MoePermute(View(offsets, DType::kI32, {e + 1}), View(perm, DType::kI32, {10}),
                              View(rows, DType::kI32, {10}), View(ids, DType::kI32, {t, k}),
                              nullptr)
                  .ok());
  std::vector<int32_t> padded_token(e * cap, -1), padded_row(10, -1);
  ASSERT_TRUE(cpu::MoePadLayout(View(padded_token, DType::kI32, {e * cap}),
                                View(padded_row, DType::kI32, {10}),
                                View(offsets, DType::kI32, {e + 1}), View(perm, DType::kI32, {10}),
                                View(rows, DType::kI32, {10}), View(ids, DType::kI32, {t, k}), cap,
                                nullptr)
                  .ok());
  // Expert 0: tokens 0, 2, 3; expert 1: 0, 1, 3, 4; expert 2: none; expert 3: 1, 2, 4.
  EXPECT_EQ(padded_token, (std::vector<int32_t>{0, 2, 3, 0, 0, 1, 3, 4, 0, 0, 0, 0, 1, 2, 4, 0}));
  for (int64_t i = 0; i < t * k; ++i) {
    EXPECT_EQ(padded_row[i] / cap, ids[i]) << i;  // in its expert's slot
    EXPECT_EQ(padded_token[padded_row[i]], i / k) << i;  // holding its token
  }
  // An expert with more rows than cap is refused.
  EXPECT_FALSE(cpu::MoePadLayout(View(padded_token, DType::kI32, {e * 3}),
                                 View(padded_row, DType::kI32, {10}),
                                 View(offsets, DType::kI32, {e + 1}),
                                 View(perm, DType::kI32, {10}), View(rows, DType::kI32, {10}),
                                 View(ids, DType::kI32, {t, k}), 3, nullptr)
                   .ok());
}

TEST(MoeExpertsTest, BucketRows) {
  EXPECT_EQ(MoeBucketRows(1), 16);
  EXPECT_EQ(MoeBucketRows(16), 16);
  EXPECT_EQ(MoeBucketRows(17), 32);
  EXPECT_EQ(MoeBucketRows(512), 512);
  EXPECT_EQ(MoeBucketRows(513), 576);
  for (int64_t n = 1; n < 5000; ++n) {
    const int64_t b = MoeBucketRows(n);
    ASSERT_GE(b, n);
    ASSERT_LT(b - n, std::max<int64_t>(16, n / 8 + 1)) << n;
    ASSERT_LE(b - n + n, MoePaddedRows(n)) << n;
  }
}

}  // namespace
}  // namespace tandem::kernels
