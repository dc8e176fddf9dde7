#include "kernels/dflash2/candidate_selector.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace tandem::kernels::dflash2 {
namespace {

// sum_r a[r] * p[r] * b[r]
template <typename T>
T Triple(const T* a, const T* p, const T* b, int64_t R) {
  T acc = 0;
  for (int64_t r = 0; r < R; ++r) acc += a[r] * p[r] * b[r];
  return acc;
}

}  // namespace

template <typename T>
void SelectorTopK(const SelectorShape& s, const T* logits, int32_t* ids, T* values) {
  std::vector<int32_t> order(static_cast<size_t>(s.vocab));
  for (int64_t t = 0; t < s.rows; ++t) {
    const T* row = logits + t * s.vocab;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + s.top_k, order.end(),
                      [row](int32_t a, int32_t b) {
                        return row[a] > row[b] || (row[a] == row[b] && a < b);
                      });
    for (int64_t j = 0; j < s.top_k; ++j) {
      ids[t * s.top_k + j] = order[static_cast<size_t>(j)];
      values[t * s.top_k + j] = row[order[static_cast<size_t>(j)]];
    }
  }
}

template <typename T>
void SelectorScoresForward(const SelectorShape& s, const T* hidden, const T* wh, const T* pred,
                           const T* succ, const int32_t* prev, const int32_t* ids,
                           const T* unary, T* proj, T* scores) {
  const int64_t H = s.hidden, R = s.rank, K = s.top_k;
  for (int64_t t = 0; t < s.rows; ++t) {
    T* p = proj + t * R;
    for (int64_t r = 0; r < R; ++r) {
      T acc = 0;
      for (int64_t c = 0; c < H; ++c) acc += hidden[t * H + c] * wh[r * H + c];
      p[r] = acc;
    }
    const T* a = pred + static_cast<int64_t>(prev[t]) * R;
    for (int64_t j = 0; j < K; ++j) {
      const T* b = succ + static_cast<int64_t>(ids[t * K + j]) * R;
      scores[t * K + j] = unary[t * K + j] + Triple(a, p, b, R);
    }
  }
}

template <typename T>
void SelectorScoresBackward(const SelectorShape& s, const T* hidden, const T* wh, const T* pred,
                            const T* succ, const int32_t* prev, const int32_t* ids,
                            const T* proj, const T* dscores, T* dlogits, T* dhidden, T* dwh,
                            T* dpred, T* dsucc) {
  const int64_t H = s.hidden, R = s.rank, K = s.top_k;
  std::vector<T> dp(static_cast<size_t>(R));
  for (int64_t t = 0; t < s.rows; ++t) {
    const T* p = proj + t * R;
    const int64_t pv = prev[t];
    const T* a = pred + pv * R;
    std::fill(dp.begin(), dp.end(), T(0));
    for (int64_t j = 0; j < K; ++j) {
      const T g = dscores[t * K + j];
      if (g == T(0)) continue;
      const int64_t id = ids[t * K + j];
      const T* b = succ + id * R;
      if (dlogits != nullptr) dlogits[t * s.vocab + id] += g;
      for (int64_t r = 0; r < R; ++r) {
        dp[static_cast<size_t>(r)] += g * a[r] * b[r];
        dpred[pv * R + r] += g * p[r] * b[r];
        dsucc[id * R + r] += g * a[r] * p[r];
      }
    }
    for (int64_t r = 0; r < R; ++r) {
      const T g = dp[static_cast<size_t>(r)];
      for (int64_t c = 0; c < H; ++c) {
        dhidden[t * H + c] += g * wh[r * H + c];
        dwh[r * H + c] += g * hidden[t * H + c];
      }
    }
  }
}

template <typename T>
SelectorLossResult SelectorLoss(const SelectorShape& s, const T* scores, const int32_t* ids,
                                const int32_t* target, const T* weight, T* dscores) {
  const int64_t K = s.top_k;
  SelectorLossResult out;
  std::vector<int64_t> where(static_cast<size_t>(s.rows), -1);
  for (int64_t t = 0; t < s.rows; ++t) {
    for (int64_t j = 0; j < K; ++j)
      if (ids[t * K + j] == target[t]) { where[static_cast<size_t>(t)] = j; break; }
    if (where[static_cast<size_t>(t)] >= 0 && weight[t] > T(0)) {
      out.weight += static_cast<double>(weight[t]);
      ++out.covered;
    }
  }
  for (int64_t i = 0; i < s.rows * K; ++i) dscores[i] = T(0);
  if (out.weight <= 0) return out;
  const T inv = T(1) / static_cast<T>(out.weight);
  for (int64_t t = 0; t < s.rows; ++t) {
    const int64_t y = where[static_cast<size_t>(t)];
    if (y < 0 || !(weight[t] > T(0))) continue;
    const T* row = scores + t * K;
    const int64_t best = std::max_element(row, row + K) - row;
    if (best == y) ++out.correct;
    T m = row[0];
    for (int64_t j = 1; j < K; ++j) m = std::max(m, row[j]);
    T z = 0;
    for (int64_t j = 0; j < K; ++j) z += std::exp(row[j] - m);
    const T lse = m + std::log(z);
    out.loss += static_cast<double>(weight[t] * inv * (lse - row[y]));
    for (int64_t j = 0; j < K; ++j)
      dscores[t * K + j] = weight[t] * inv * (std::exp(row[j] - lse) - (j == y ? T(1) : T(0)));
  }
  return out;
}

template <typename T>
void SelectorGreedyPath(const SelectorShape& s, int64_t n, const T* proj, const T* pred,
                        const T* succ, const int32_t* ids, const T* unary, int32_t anchor,
                        int32_t* path) {
  const int64_t R = s.rank, K = s.top_k;
  int32_t prev = anchor;
  for (int64_t i = 0; i < n; ++i) {
    const T* a = pred + static_cast<int64_t>(prev) * R;
    int64_t best = 0;
    T best_score = 0;
    for (int64_t j = 0; j < K; ++j) {
      const T* b = succ + static_cast<int64_t>(ids[i * K + j]) * R;
      const T score = unary[i * K + j] + Triple(a, proj + i * R, b, R);
      if (j == 0 || score > best_score) { best = j; best_score = score; }
    }
    prev = ids[i * K + best];
    path[i] = prev;
  }
}

#define TANDEM_DFLASH2_SELECTOR(T)                                                             \
  template void SelectorTopK<T>(const SelectorShape&, const T*, int32_t*, T*);                 \
  template void SelectorScoresForward<T>(const SelectorShape&, const T*, const T*, const T*,   \
                                         const T*, const int32_t*, const int32_t*, const T*,   \
                                         T*, T*);                                               \
  template void SelectorScoresBackward<T>(const SelectorShape&, const T*, const T*, const T*,  \
                                          const T*, const int32_t*, const int32_t*, const T*,  \
                                          const T*, T*, T*, T*, T*, T*);                        \
  template SelectorLossResult SelectorLoss<T>(const SelectorShape&, const T*, const int32_t*,  \
                                              const int32_t*, const T*, T*);                    \
  template void SelectorGreedyPath<T>(const SelectorShape&, int64_t, const T*, const T*,       \
                                      const T*, const int32_t*, const T*, int32_t, int32_t*);
TANDEM_DFLASH2_SELECTOR(float)
TANDEM_DFLASH2_SELECTOR(double)
#undef TANDEM_DFLASH2_SELECTOR

}  // namespace tandem::kernels::dflash2
