// Test-only: a naive float64 DFlash drafter forward + weighted loss, written directly from
// docs/architecture.md's description (no kernels), used to check the drafter's forward and,
// by central finite differences, its backward. Parameters come as a flat double array with the
// drafter's flat layout (dflash_params.h). Noise-free (noise_std = 0). A DFlash2 config
// (docs/dflash2.md) adds the input embedding scale, the dynamic convolutions around attention
// and the MLP, the logit transform, and the selector's strict top-k loss with weight `selector_weight` (teacher-
// forced prev; the top-k of the float64 logits, ties to the lower id).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "models/dflash/dflash_anchors.h"
#include "models/dflash/dflash_config.h"
#include "models/dflash/dflash_params.h"

namespace tandem::models::testing {

struct RefInputs {
  const DFlashConfig* config;
  const DFlashParamLayout* layout;
  const DFlashBlockPlan* plan;
  std::vector<std::vector<double>> context;  // k x [T*H]
  std::vector<double> embedding, lm_head;    // [V*H] each
  double selector_weight = 1.0;              // DFlash2's alpha
};

class DFlashReference {
 public:
  explicit DFlashReference(const RefInputs& in) : in_(in) {}

  // Loss for parameters `p` (flat, layout order): the DFlash loss, plus alpha times the
  // selector loss for DFlash2 (the parts in *dflash / *selector when given).
  double Loss(const std::vector<double>& p, double* dflash = nullptr,
              double* selector = nullptr) const {
    const std::optional<DFlash2Extension>& d2 = in_.config->dflash2;
    const TransformerConfig& c = in_.config->layers;
    const int64_t h = c.hidden_size, hq = c.num_attention_heads, hk = c.num_key_value_heads,
                  d = c.head_dim, inter = c.intermediate_size, v = c.vocab_size;
    const DFlashBlockPlan& pl = *in_.plan;
    const int64_t t = pl.tokens, bs = pl.block_size, r = pl.num_blocks * bs;
    const int64_t k = static_cast<int64_t>(in_.context.size());
    const double eps = c.rms_norm_eps;
    size_t spec = 0;
    auto next = [&] { return p.data() + in_.layout->specs[spec++].offset; };
    struct Layer {
      const double *q, *k, *v, *o, *gate, *up, *down, *in_n, *post_n, *qn, *kn;
      const double *a_proj, *m_proj, *a_base, *m_base;  // DFlash2
    };
    std::vector<Layer> layers(c.num_hidden_layers);
    for (auto& L : layers) {
      L.q = next(); L.k = next(); L.v = next(); L.o = next();
      L.gate = next(); L.up = next(); L.down = next();
      if (d2) { L.a_proj = next(); L.m_proj = next(); }
    }
    const double* fc = next();
    const double *sel_proj = nullptr, *sel_pred = nullptr, *sel_succ = nullptr;
    if (d2) { sel_proj = next(); sel_pred = next(); sel_succ = next(); }
    for (auto& L : layers) {
      L.in_n = next(); L.post_n = next(); L.qn = next(); L.kn = next();
      if (d2) { L.a_base = next(); L.m_base = next(); }
    }
    // DFlash2's convolution of `src` [r, h] with side `side` of base [2, K, h] and of the
    // dynamic weights dyn [r, 2*K*G] (identity without DFlash2).
    const int64_t taps = d2 ? d2->conv_kernel_size : 1, group = d2 ? d2->conv_group_size : 1;
    const int64_t kg = taps * (h / group);
    auto conv = [&](const std::vector<double>& src, const double* base,
                    const std::vector<double>& dyn, int side) {
      if (!d2) return src;
      std::vector<double> y(r * h, 0.0);
      for (int64_t i = 0; i < r; ++i)
        for (int64_t tap = 0; tap < taps && tap <= i % bs; ++tap)
          for (int64_t e = 0; e < h; ++e)
            y[i * h + e] += (base[(side * taps + tap) * h + e] +
                             dyn[i * 2 * kg + side * kg + tap * (h / group) + e / group]) *
                            src[(i - tap) * h + e];
      return y;
    };
    const double* hidden_norm = next();
    const double* final_norm = next();

    // Context: hidden_norm(fc(concat)).
    std::vector<double> concat(t * k * h), ctx(t * h);
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < k; ++j)
        for (int64_t e = 0; e < h; ++e) concat[i * k * h + j * h + e] = in_.context[j][i * h + e];
    Linear(concat.data(), fc, ctx.data(), t, k * h, h);
    for (int64_t i = 0; i < t; ++i) RmsNorm(&ctx[i * h], hidden_norm, h, eps);

    std::vector<double> x(r * h);
    const double embed_scale = d2 ? d2->input_embedding_scale : 1.0;
    for (int64_t i = 0; i < r; ++i)
      for (int64_t e = 0; e < h; ++e)
        x[i * h + e] = in_.embedding[pl.block_ids[i] * h + e] * embed_scale;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const Layer& L = layers[l];
      const bool sliding = c.layer_types[l] == LayerType::kSlidingAttention;
      const bool causal = DFlashLayerCausal(*in_.config, l);
      const int64_t window = sliding ? *c.sliding_window : 0;
      std::vector<double> xn = x, da(d2 ? r * 2 * kg : 0), dm(d2 ? r * 2 * kg : 0);
      for (int64_t i = 0; i < r; ++i) RmsNorm(&xn[i * h], L.in_n, h, eps);
      if (d2) Linear(xn.data(), L.a_proj, da.data(), r, h, 2 * kg);
      xn = conv(xn, L.a_base, da, 0);
      std::vector<double> q(r * hq * d), kb(r * hk * d), vb(r * hk * d), kc(t * hk * d),
          vc(t * hk * d);
      Linear(xn.data(), L.q, q.data(), r, h, hq * d);
      Linear(xn.data(), L.k, kb.data(), r, h, hk * d);
      Linear(xn.data(), L.v, vb.data(), r, h, hk * d);
      Linear(ctx.data(), L.k, kc.data(), t, h, hk * d);
      Linear(ctx.data(), L.v, vc.data(), t, h, hk * d);
      for (int64_t i = 0; i < r; ++i) {
        for (int64_t hh = 0; hh < hq; ++hh) {
          RmsNorm(&q[(i * hq + hh) * d], L.qn, d, eps);
          Rope(&q[(i * hq + hh) * d], pl.block_pos[i], d, c.rope_theta);
        }
        for (int64_t hh = 0; hh < hk; ++hh) {
          RmsNorm(&kb[(i * hk + hh) * d], L.kn, d, eps);
          Rope(&kb[(i * hk + hh) * d], pl.block_pos[i], d, c.rope_theta);
        }
      }
      for (int64_t i = 0; i < t; ++i)
        for (int64_t hh = 0; hh < hk; ++hh) {
          RmsNorm(&kc[(i * hk + hh) * d], L.kn, d, eps);
          Rope(&kc[(i * hk + hh) * d], pl.ctx_pos[i], d, c.rope_theta);
        }
      std::vector<double> attn(r * hq * d, 0.0);
      const double scale = 1.0 / std::sqrt(static_cast<double>(d));
      for (int64_t b = 0; b < pl.num_blocks; ++b) {
        const int64_t a = pl.anchors[b];
        for (int64_t si = 0; si < bs; ++si)
          for (int64_t hh = 0; hh < hq; ++hh) {
            // The serving rule: slot si (position a + si) sees keys whose position is at most
            // window - 1 before its own, context and block keys alike.
            const int64_t lo =
                window > 0 ? std::max<int64_t>(pl.doc_start[b], a + si - (window - 1)) : pl.doc_start[b];
            const int64_t blk_lo = window > 0 ? std::max<int64_t>(0, si - (window - 1)) : 0;
            const int64_t kv = hh / (hq / hk), row = b * bs + si;
            const double* qv = &q[(row * hq + hh) * d];
            std::vector<std::pair<double, const double*>> sc;
            for (int64_t j = lo; j < a; ++j)
              sc.push_back({Dot(qv, &kc[(j * hk + kv) * d], d) * scale, &vc[(j * hk + kv) * d]});
            for (int64_t j = blk_lo; j < bs; ++j) {
              if (causal && j > si) continue;
              const int64_t rj = b * bs + j;
              sc.push_back({Dot(qv, &kb[(rj * hk + kv) * d], d) * scale, &vb[(rj * hk + kv) * d]});
            }
            double m = -1e300, z = 0;
            for (auto& s : sc) m = std::max(m, s.first);
            for (auto& s : sc) z += std::exp(s.first - m);
            double* o = &attn[(row * hq + hh) * d];
            for (auto& s : sc)
              for (int64_t e = 0; e < d; ++e) o[e] += std::exp(s.first - m) / z * s.second[e];
          }
      }
      std::vector<double> h1(r * h);
      Linear(attn.data(), L.o, h1.data(), r, hq * d, h);
      h1 = conv(h1, L.a_base, da, 1);
      for (int64_t i = 0; i < r * h; ++i) h1[i] += x[i];
      std::vector<double> h1n = h1, g(r * inter), u(r * inter), act(r * inter), out(r * h);
      for (int64_t i = 0; i < r; ++i) RmsNorm(&h1n[i * h], L.post_n, h, eps);
      if (d2) Linear(h1n.data(), L.m_proj, dm.data(), r, h, 2 * kg);
      h1n = conv(h1n, L.m_base, dm, 0);
      Linear(h1n.data(), L.gate, g.data(), r, h, inter);
      Linear(h1n.data(), L.up, u.data(), r, h, inter);
      for (int64_t i = 0; i < r * inter; ++i) act[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      Linear(act.data(), L.down, out.data(), r, inter, h);
      out = conv(out, L.m_base, dm, 1);
      for (int64_t i = 0; i < r * h; ++i) x[i] = h1[i] + out[i];
    }
    for (int64_t i = 0; i < r; ++i) RmsNorm(&x[i * h], final_norm, h, eps);
    double num = 0, den = 0, sel_num = 0, sel_den = 0;
    std::vector<double> logits(v);
    for (int64_t i = 0; i < r; ++i) {
      if (pl.weights[i] == 0 || pl.targets[i] < 0) continue;
      Linear(&x[i * h], in_.lm_head.data(), logits.data(), 1, h, v);
      if (d2) {
        const double m = d2->output_multiplier, cap = d2->final_logit_softcapping.value_or(0);
        for (double& lg : logits) lg = cap > 0 ? cap * std::tanh(m * lg / cap) : m * lg;
      }
      double m = *std::max_element(logits.begin(), logits.end()), z = 0;
      for (double lg : logits) z += std::exp(lg - m);
      num += pl.weights[i] * (m + std::log(z) - logits[pl.targets[i]]);
      den += pl.weights[i];
      if (!d2) continue;
      // The selector: top-k (ties to the lower id), teacher-forced prev, covered rows only.
      const int64_t topk = d2->selector_top_k, rank = d2->selector_rank;
      std::vector<int64_t> ids(v);
      for (int64_t j = 0; j < v; ++j) ids[j] = j;
      std::partial_sort(ids.begin(), ids.begin() + topk, ids.end(), [&](int64_t a, int64_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
      });
      const int64_t slot = std::find(ids.begin(), ids.begin() + topk, pl.targets[i]) - ids.begin();
      if (slot == topk) continue;
      const int64_t prev = !pl.prev_ids.empty() ? pl.prev_ids[i]
                           : i % bs <= 1          ? pl.block_ids[i - i % bs]
                                                  : pl.targets[i - 1];
      std::vector<double> proj(rank), score(topk);
      Linear(&x[i * h], sel_proj, proj.data(), 1, h, rank);
      for (int64_t j = 0; j < topk; ++j) {
        score[j] = logits[ids[j]];
        for (int64_t q = 0; q < rank && prev >= 0 && prev < v; ++q)  // else no pair term
          score[j] += sel_pred[prev * rank + q] * proj[q] * sel_succ[ids[j] * rank + q];
      }
      const double sm = *std::max_element(score.begin(), score.end());
      double sz = 0;
      for (double sc : score) sz += std::exp(sc - sm);
      sel_num += pl.weights[i] * (sm + std::log(sz) - score[slot]);
      sel_den += pl.weights[i];
    }
    const double main = den > 0 ? num / den : 0.0, sel = sel_den > 0 ? sel_num / sel_den : 0.0;
    if (dflash) *dflash = main;
    if (selector) *selector = sel;
    return main + (d2 ? in_.selector_weight * sel : 0.0);
  }

 private:
  static double Dot(const double* a, const double* b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
  }
  // y [rows, out] = x [rows, in] W^T, W [out, in].
  static void Linear(const double* x, const double* w, double* y, int64_t rows, int64_t in,
                     int64_t out) {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t o = 0; o < out; ++o) y[i * out + o] = Dot(x + i * in, w + o * in, in);
  }
  static void RmsNorm(double* x, const double* w, int64_t n, double eps) {
    const double rstd = 1.0 / std::sqrt(Dot(x, x, n) / n + eps);
    for (int64_t i = 0; i < n; ++i) x[i] = x[i] * rstd * w[i];
  }
  static void Rope(double* x, int64_t pos, int64_t d, double theta) {
    const int64_t half = d / 2;
    for (int64_t i = 0; i < half; ++i) {
      const double a = pos * std::pow(theta, -2.0 * i / d);
      const double x0 = x[i], x1 = x[i + half];
      x[i] = x0 * std::cos(a) - x1 * std::sin(a);
      x[i + half] = x1 * std::cos(a) + x0 * std::sin(a);
    }
  }

  RefInputs in_;
};

}  // namespace tandem::models::testing
