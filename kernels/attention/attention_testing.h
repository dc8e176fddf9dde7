// Test support for attention: a float64 naive attention that takes an explicit dense mask,
// the masks of the two attention patterns built element by element from their definitions,
// seeded random inputs and an error report. Header-only; for tests and benchmarks, not part
// of the kernels library. Thread-safety: free functions on caller-owned buffers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/core/dtype.h"

namespace tandem::kernels::attention_testing {

inline std::vector<bf16> RandomBf16(int64_t n, uint64_t seed, float amp = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-amp, amp);
  std::vector<bf16> out(static_cast<size_t>(n));
  for (auto& x : out) x = bf16(dist(rng));
  return out;
}

inline std::vector<double> ToDouble(const std::vector<bf16>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = v[i].f();
  return out;
}

// out [nq, hq, d] and lse [nq, hq] of softmax(scale * q k^T + mask) v, in float64, where
// mask[i * nk + j] != 0 lets query row i see key row j. q [nq, hq, d]; k, v [nk, hk, d].
// A row that sees nothing gets out = 0 and lse = -inf.
inline void NaiveMaskedAttention(const std::vector<double>& q, const std::vector<double>& k,
                                 const std::vector<double>& v, const std::vector<char>& mask,
                                 int64_t nq, int64_t nk, int64_t hq, int64_t hk, int64_t d,
                                 double scale, std::vector<double>* out,
                                 std::vector<double>* lse) {
  out->assign(nq * hq * d, 0.0);
  lse->assign(nq * hq, -std::numeric_limits<double>::infinity());
  std::vector<double> s(nk);
  for (int64_t i = 0; i < nq; ++i) {
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t kh = h / (hq / hk);
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < nk; ++j) {
        if (!mask[i * nk + j]) continue;
        double dot = 0.0;
        for (int64_t c = 0; c < d; ++c) dot += q[(i * hq + h) * d + c] * k[(j * hk + kh) * d + c];
        s[j] = scale * dot;
        m = std::max(m, s[j]);
      }
      if (m == -std::numeric_limits<double>::infinity()) continue;
      double l = 0.0;
      for (int64_t j = 0; j < nk; ++j)
        if (mask[i * nk + j]) l += std::exp(s[j] - m);
      for (int64_t j = 0; j < nk; ++j) {
        if (!mask[i * nk + j]) continue;
        const double p = std::exp(s[j] - m) / l;
        for (int64_t c = 0; c < d; ++c) (*out)[(i * hq + h) * d + c] += p * v[(j * hk + kh) * d + c];
      }
      (*lse)[i * hq + h] = m + std::log(l);
    }
  }
}

// [T, T]: token i sees token j iff both lie in the same document and j <= i.
inline std::vector<char> VarlenCausalMask(const std::vector<int32_t>& cu_seqlens) {
  const int64_t t = cu_seqlens.back();
  std::vector<int64_t> doc(t);
  for (size_t i = 0; i + 1 < cu_seqlens.size(); ++i)
    for (int64_t j = cu_seqlens[i]; j < cu_seqlens[i + 1]; ++j) doc[j] = static_cast<int64_t>(i);
  std::vector<char> mask(t * t, 0);
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j <= i; ++j) mask[i * t + j] = doc[i] == doc[j];
  return mask;
}

// [NB*16, T + NB*16] over keys [k_ctx rows; k_blk rows], by positions as a server sees them
// (attention.h): slot i of block b is the query at position p = anchor + i; context token j
// is the key at position j, block token (b, i') the key at position anchor + i'. The query
// sees a key iff it is in its document and before the anchor (context) or in its own block
// (and i' <= i when causal), and, with a window W > 0, p - key position <= W - 1.
inline std::vector<char> DFlashMask(const std::vector<int32_t>& anchors,
                                    const std::vector<int32_t>& doc_start, int64_t t, int window,
                                    bool causal) {
  const int64_t nb = static_cast<int64_t>(anchors.size()), rows = nb * 16, nk = t + rows;
  std::vector<char> mask(rows * nk, 0);
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t i = 0; i < 16; ++i) {
      char* m = &mask[(b * 16 + i) * nk];
      const int64_t p = anchors[b] + i;
      auto in_window = [&](int64_t key_pos) { return window == 0 || p - key_pos <= window - 1; };
      for (int64_t j = 0; j < t; ++j)
        m[j] = j >= doc_start[b] && j < anchors[b] && in_window(j);
      for (int64_t bb = 0; bb < nb; ++bb)
        for (int64_t ii = 0; ii < 16; ++ii)
          m[t + bb * 16 + ii] = bb == b && (!causal || ii <= i) && in_window(anchors[b] + ii);
    }
  }
  return mask;
}

// Largest excess of |got - want| over atol + rtol * |want|; ok when nothing exceeds.
struct CloseReport {
  bool ok = true;
  double max_abs_err = 0.0;
  int64_t worst = -1;
  double got = 0.0, want = 0.0;
  std::string ToString(const char* what) const {
    return fmt::format("{}: max |err| {:.3e} at flat index {} (got {:.6f}, want {:.6f})", what,
                       max_abs_err, worst, got, want);
  }
};
template <typename A, typename B>
CloseReport Compare(const std::vector<A>& got, const std::vector<B>& want, double atol,
                    double rtol) {
  CloseReport r;
  double worst_excess = -1.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    const double err = std::isnan(g) ? std::numeric_limits<double>::infinity() : std::abs(g - w);
    const double excess = err - (atol + rtol * std::abs(w));
    r.max_abs_err = std::max(r.max_abs_err, err);
    if (excess > worst_excess) {
      worst_excess = excess;
      r.worst = static_cast<int64_t>(i);
      r.got = g;
      r.want = w;
    }
  }
  r.ok = worst_excess <= 0.0;
  return r;
}

inline std::vector<float> ToFloat(const std::vector<bf16>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = v[i].f();
  return out;
}

}  // namespace tandem::kernels::attention_testing

namespace tandem::kernels::attention_testing {

// A packed batch of documents with DFlash anchors: cu_seqlens [docs+1]; anchors and their
// doc_start [nb]. The first anchors sit on the edges (each document's first and last token,
// i.e. no context and the longest context), the rest are uniform over all tokens.
struct DFlashLayout {
  std::vector<int32_t> cu_seqlens, anchors, doc_start;
  int64_t t = 0;
};
inline DFlashLayout MakeDFlashLayout(const std::vector<int>& doc_lens, int nb, uint64_t seed) {
  DFlashLayout l;
  l.cu_seqlens.push_back(0);
  for (int len : doc_lens) l.cu_seqlens.push_back(l.cu_seqlens.back() + len);
  l.t = l.cu_seqlens.back();
  std::vector<int32_t> doc_of(l.t);
  for (size_t i = 0; i < doc_lens.size(); ++i)
    for (int32_t j = l.cu_seqlens[i]; j < l.cu_seqlens[i + 1]; ++j) doc_of[j] = static_cast<int32_t>(i);
  std::vector<int32_t> picks;
  for (size_t i = 0; i < doc_lens.size(); ++i) {
    if (doc_lens[i] == 0) continue;
    picks.push_back(l.cu_seqlens[i]);
    picks.push_back(l.cu_seqlens[i + 1] - 1);
  }
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> tok(0, l.t - 1);
  for (int b = 0; b < nb; ++b) {
    const int32_t a = b < static_cast<int>(picks.size()) ? picks[b] : static_cast<int32_t>(tok(rng));
    l.anchors.push_back(a);
    l.doc_start.push_back(l.cu_seqlens[doc_of[a]]);
  }
  return l;
}

}  // namespace tandem::kernels::attention_testing

namespace tandem::kernels::attention_testing {

// The sliding window's edge in closed form, a case the old rule (every slot sees context
// keys >= anchor - W) gets wrong. One block at anchor `a` of a document starting at 0; q = 0,
// so every visible key weighs the same; v_ctx = 1 and v_blk = 0. Slot i (position a + i)
// then outputs n_ctx / (n_ctx + n_blk) and its lse is log(n_ctx + n_blk), with the counts
// of the serving rule p - (W - 1) <= key position (attention.h), written out here:
//   n_ctx(i) = min(a, max(0, W - 1 - i)),  n_blk(i) = (causal ? i + 1 : 16) - max(0, i - (W - 1)).
// The old rule would give n_ctx = min(a, W) and n_blk = (causal ? i + 1 : 16) for every slot.
// REQUIRES: window > 0, a >= 0.
struct WindowEdgeCase {
  int a, window;
  bool causal;
  int d = 64;
};
struct WindowEdgeProblem {
  std::vector<bf16> q, kb, vb, kc, vc;
  std::vector<int32_t> anchors, doc_start;
  std::vector<double> want_out, want_lse;  // [16] (one head, every dim of out the same)
};
inline WindowEdgeProblem MakeWindowEdgeProblem(const WindowEdgeCase& c) {
  WindowEdgeProblem p;
  const int t = c.a + 1, d = c.d;
  p.q.assign(16 * d, bf16(0.0f));
  p.kb = RandomBf16(16 * d, 41);
  p.kc = RandomBf16(int64_t{t} * d, 42);
  p.vb.assign(16 * d, bf16(0.0f));
  p.vc.assign(int64_t{t} * d, bf16(1.0f));
  p.anchors = {c.a};
  p.doc_start = {0};
  for (int i = 0; i < 16; ++i) {
    const int n_ctx = std::min(c.a, std::max(0, c.window - 1 - i));
    const int n_blk = (c.causal ? i + 1 : 16) - std::max(0, i - (c.window - 1));
    p.want_out.push_back(static_cast<double>(n_ctx) / (n_ctx + n_blk));
    p.want_lse.push_back(std::log(static_cast<double>(n_ctx + n_blk)));
  }
  return p;
}

}  // namespace tandem::kernels::attention_testing
