// Test utilities for the selector ops (selector.h): a random problem on odd shapes (with prev
// tokens outside the vocabulary, targets outside the candidates and zero weights), and float64
// references built on candidate_selector.h. Shared by selector_test.cc and
// selector_gpu_test.cc. Test-only. Thread-safety: free functions on caller-owned data.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/core/tensor.h"
#include "kernels/dflash2/candidate_selector.h"
#include "kernels/random/philox.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels::dflash2 {

struct SelectorCase {
  int64_t R, k, Rk, V;
  bool bf16_proj = false;
  bool zero_weights = false;
};

inline std::vector<SelectorCase> SelectorTestCases() {
  return {{.R = 1, .k = 1, .Rk = 1, .V = 3},
          {.R = 1, .k = 3, .Rk = 5, .V = 9},
          {.R = 7, .k = 3, .Rk = 5, .V = 11},
          {.R = 7, .k = 5, .Rk = 1, .V = 5},  // k == V
          {.R = 33, .k = 16, .Rk = 5, .V = 40},
          {.R = 33, .k = 16, .Rk = 1, .V = 16, .bf16_proj = true},  // k == V
          {.R = 7, .k = 3, .Rk = 5, .V = 11, .bf16_proj = true},
          {.R = 7, .k = 3, .Rk = 5, .V = 11, .zero_weights = true}};
}

// Op-facing storage (bf16 codebooks, f32 or bf16 proj, f32 unary) and the same values in
// float64 (the *_d vectors), which the references read: perturbing those leaves the op inputs
// alone.
struct SelectorProblem {
  int64_t R = 0, k = 0, Rk = 0, V = 0;
  bool bf16_proj = false;
  std::vector<float> proj_f, unary, weights;
  std::vector<bf16> proj_b, pred, succ;
  std::vector<int32_t> prev, ids, targets;
  std::vector<double> proj_d, pred_d, succ_d, unary_d;

  int64_t rk() const { return R * k; }
  template <typename T>
  TensorView View(const std::vector<T>& v, Shape shape) const {
    DType dt = std::is_same_v<T, float> ? DType::kF32
               : std::is_same_v<T, bf16> ? DType::kBF16
                                         : DType::kI32;
    return TensorView(const_cast<T*>(v.data()), dt, shape);
  }
  TensorView ProjView() const { return bf16_proj ? View(proj_b, {R, Rk}) : View(proj_f, {R, Rk}); }
  TensorView PredView() const { return View(pred, {V, Rk}); }
  TensorView SuccView() const { return View(succ, {V, Rk}); }
};

inline SelectorProblem MakeSelectorProblem(const SelectorCase& c, uint64_t seed) {
  SelectorProblem p;
  p.R = c.R, p.k = c.k, p.Rk = c.Rk, p.V = c.V, p.bf16_proj = c.bf16_proj;
  p.proj_f = testing::RandomFloats(c.R * c.Rk, seed, -1.5f, 1.5f);
  if (c.bf16_proj) {
    p.proj_b = testing::ToBf16(p.proj_f);
    p.proj_d = testing::ToDouble(p.proj_b);
  } else {
    p.proj_d = testing::ToDouble(std::span<const float>(p.proj_f));
  }
  p.pred = testing::RandomBf16(c.V * c.Rk, seed + 1, -1.5f, 1.5f);
  p.succ = testing::RandomBf16(c.V * c.Rk, seed + 2, -1.5f, 1.5f);
  p.pred_d = testing::ToDouble(p.pred);
  p.succ_d = testing::ToDouble(p.succ);
  p.unary = testing::RandomFloats(c.R * c.k, seed + 3, -2.f, 2.f);
  p.unary_d = testing::ToDouble(std::span<const float>(p.unary));
  std::mt19937_64 gen(seed + 4);
  std::vector<int32_t> vocab(c.V);
  for (int64_t r = 0; r < c.R; ++r) {
    std::iota(vocab.begin(), vocab.end(), 0);
    std::shuffle(vocab.begin(), vocab.end(), gen);
    p.ids.insert(p.ids.end(), vocab.begin(), vocab.begin() + c.k);
    // Every 5th row has no pair term (prev -1 or V); every 4th target misses the candidates.
    p.prev.push_back(r % 5 == 4 ? (r % 2 ? -1 : static_cast<int32_t>(c.V))
                                : static_cast<int32_t>(gen() % c.V));
    const bool miss = r % 4 == 3;
    p.targets.push_back(miss ? (c.k < c.V ? vocab[c.k] : static_cast<int32_t>(c.V + 2))
                             : vocab[gen() % c.k]);
    p.weights.push_back(c.zero_weights || r % 6 == 5 ? 0.f : 0.25f + 0.75f * (gen() % 97) / 97.f);
  }
  return p;
}

// scores[R, k] in float64 for the given prev (candidate_selector.h with hidden = proj and an
// identity hidden projection; rows whose prev is outside the vocabulary keep the unary).
inline std::vector<double> ReferenceScores(const SelectorProblem& p,
                                           const std::vector<int32_t>& prev) {
  const SelectorShape s{.rows = p.R, .hidden = p.Rk, .vocab = p.V, .rank = p.Rk, .top_k = p.k};
  std::vector<double> eye(p.Rk * p.Rk, 0.0), proj(p.R * p.Rk), scores(p.rk());
  for (int64_t i = 0; i < p.Rk; ++i) eye[i * p.Rk + i] = 1.0;
  std::vector<int32_t> safe(prev);
  for (int32_t& t : safe) t = t >= 0 && t < p.V ? t : 0;
  SelectorScoresForward<double>(s, p.proj_d.data(), eye.data(), p.pred_d.data(), p.succ_d.data(),
                                safe.data(), p.ids.data(), p.unary_d.data(), proj.data(),
                                scores.data());
  for (int64_t r = 0; r < p.R; ++r)
    if (safe[r] != prev[r])
      for (int64_t j = 0; j < p.k; ++j) scores[r * p.k + j] = p.unary_d[r * p.k + j];
  return scores;
}

// The unscaled loss L in float64 (teacher-forced prev).
inline double ReferenceLoss(const SelectorProblem& p) {
  const std::vector<double> scores = ReferenceScores(p, p.prev);
  std::vector<double> w(p.weights.begin(), p.weights.end()), ds(p.rk());
  const SelectorShape s{.rows = p.R, .top_k = p.k};
  return SelectorLoss<double>(s, scores.data(), p.ids.data(), p.targets.data(), w.data(),
                              ds.data())
      .loss;
}

// candidate_selector.h's float64 greedy path, block by block. REQUIRES: anchors in [0, V).
inline std::vector<int32_t> ReferenceGreedyPath(const SelectorProblem& p,
                                                const std::vector<int32_t>& anchors,
                                                int64_t block_rows) {
  const SelectorShape s{.rows = p.R, .vocab = p.V, .rank = p.Rk, .top_k = p.k};
  std::vector<int32_t> path(p.R);
  for (size_t b = 0; b < anchors.size(); ++b) {
    const int64_t r0 = static_cast<int64_t>(b) * block_rows;
    SelectorGreedyPath<double>(s, block_rows, p.proj_d.data() + r0 * p.Rk, p.pred_d.data(),
                               p.succ_d.data(), p.ids.data() + r0 * p.k,
                               p.unary_d.data() + r0 * p.k, anchors[b], path.data() + r0);
  }
  return path;
}

// A sampled walk's output is consistent: probs = softmax(scores / temp) (within `tol`) with
// prev = the anchor or the path's previous token, each row sums to 1, and path[r] is the
// candidate whose interval of probs' running sum holds u (within `tol` of an edge).
inline void ExpectSampleConsistent(const SelectorProblem& p, const std::vector<int32_t>& anchors,
                                   int64_t block_rows, float temp, uint64_t seed, uint64_t offset,
                                   const std::vector<int32_t>& path,
                                   const std::vector<float>& probs, double tol) {
  std::vector<int32_t> prev(p.R);
  for (int64_t r = 0; r < p.R; ++r)
    prev[r] = r % block_rows == 0 ? anchors[r / block_rows] : path[r - 1];
  const std::vector<double> scores = ReferenceScores(p, prev);
  std::vector<double> want(p.rk());
  for (int64_t r = 0; r < p.R; ++r) {
    const double* s = scores.data() + r * p.k;
    const double m = *std::max_element(s, s + p.k);
    double z = 0, total = 0, cum = 0;
    for (int64_t j = 0; j < p.k; ++j) z += std::exp((s[j] - m) / temp);
    for (int64_t j = 0; j < p.k; ++j) want[r * p.k + j] = std::exp((s[j] - m) / temp) / z;
    for (int64_t j = 0; j < p.k; ++j) total += probs[r * p.k + j];
    EXPECT_NEAR(total, 1.0, tol * p.k) << "row " << r;
    const double u = PhiloxUniform(seed, offset, static_cast<uint64_t>(r));
    int64_t slot = -1;
    for (int64_t j = 0; j < p.k; ++j)
      if (p.ids[r * p.k + j] == path[r]) slot = j;
    ASSERT_GE(slot, 0) << "row " << r << ": path token " << path[r] << " is not a candidate";
    for (int64_t j = 0; j < slot; ++j) cum += probs[r * p.k + j];
    EXPECT_GE(u, cum - tol * p.k) << "row " << r;
    EXPECT_LT(u, cum + probs[r * p.k + slot] + tol * p.k) << "row " << r;
  }
  EXPECT_TRUE(testing::AllClose(testing::ToDouble(std::span<const float>(probs)), want, tol, 1e-4,
                                "probs"));
}

}  // namespace tandem::kernels::dflash2
