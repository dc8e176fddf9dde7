// Test helpers for the Qwen3 target: a tiny random checkpoint written with tandem's own
// safetensors writer (some tensors stored as fp32 to exercise conversion), a packed batch
// of documents, and an independent float64 reimplementation of the forward, written
// naively from the HF modeling code's math (Qwen3-MoE layers too: router, top-k, experts).
// Test-only; not part of the library.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/core/dtype.h"
#include "kernels/moe/moe_testing.h"
#include "models/io/hf_config.h"
#include "models/io/safetensors_writer.h"
#include "models/io/weight_spec.h"
#include "models/qwen3/qwen3_target.h"
#include "runtime/core/status.h"

namespace tandem::models::testing {

// Forward-vs-float64 tolerances. Every activation is stored in bf16 (relative rounding
// 2^-9 ~ 2e-3) about ten times per layer, and an element's error is set by the size of the
// terms summed into it rather than by its own value (a logit near zero is a sum of O(rms)
// products), so the absolute part scales with the tensor's RMS:
// |err| <= 5e-2*rms + 2e-2*|ref|. Observed over 3 layers: worst element <= 2.6% of the RMS,
// relative L2 error <= 5e-3 (rounding noise, as expected), so the bounds leave 2x margin,
// while the sensitivity check in qwen3_target_test.cc shows that a real mistake (documents
// attending across boundaries) is far outside them.
inline constexpr double kAtol = 5e-2, kRtol = 2e-2, kRelL2 = 1e-2;

inline std::vector<double> ToDouble(const std::vector<kernels::bf16>& v) {
  std::vector<double> out;
  for (kernels::bf16 x : v) out.push_back(x.f());
  return out;
}

inline double RelL2(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

// The relative L2 error of `got` against `want` (rows of h) and the smallest per-row cosine:
// how the FP8 forward is compared with the bf16 one.
inline void RelL2AndMinCos(const std::vector<kernels::bf16>& got,
                           const std::vector<kernels::bf16>& want, int64_t h, double* rel,
                           double* min_cos) {
  double err = 0, ref = 0;
  *min_cos = 1;
  for (size_t r = 0; r * h < got.size(); ++r) {
    double dot = 0, gg = 0, ww = 0;
    for (int64_t c = 0; c < h; ++c) {
      const double g = got[r * h + c].f(), x = want[r * h + c].f();
      dot += g * x, gg += g * g, ww += x * x, err += (g - x) * (g - x), ref += x * x;
    }
    *min_cos = std::min(*min_cos, dot / std::sqrt(gg * ww));
  }
  *rel = std::sqrt(err / ref);
}

inline double Rms(const std::vector<double>& v) {
  double ss = 0;
  for (double x : v) ss += x * x;
  return std::sqrt(ss / static_cast<double>(v.size()));
}

// A small Qwen3 (or Llama with `llama`) with odd sizes, GQA 4:2 and head_dim 8.
inline TransformerConfig TinyConfig(bool llama, bool tied) {
  TransformerConfig c;
  c.family = llama ? ModelFamily::kLlama : ModelFamily::kQwen3;
  c.model_type = llama ? "llama" : "qwen3";
  c.architectures = {llama ? "LlamaForCausalLM" : "Qwen3ForCausalLM"};
  c.vocab_size = 67;
  c.hidden_size = 24;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.intermediate_size = 40;
  c.max_position_embeddings = 128;
  c.rms_norm_eps = 1e-6;
  c.tie_word_embeddings = tied;
  c.qk_norm = !llama;
  c.rope_theta = 10000.0;
  c.rotary_dim = 8;
  c.layer_types.assign(3, LayerType::kFullAttention);
  return c;
}

// TinyConfig as a qwen3_moe: 6 experts of width 16, top-2 with renormalisation, layer 1
// dense (mlp_only_layers) with the dense intermediate_size.
inline TransformerConfig TinyMoeConfig() {
  TransformerConfig c = TinyConfig(false, false);
  c.model_type = "qwen3_moe";
  c.architectures = {"Qwen3MoeForCausalLM"};
  MoeConfig m;
  m.num_experts = 6;
  m.num_experts_per_tok = 2;
  m.moe_intermediate_size = 16;
  m.norm_topk_prob = true;
  m.mlp_only_layers = {1};
  c.moe = m;
  return c;
}

// Every weight as bf16-representable floats (the checkpoint stores exactly these values).
using HostWeights = std::map<std::string, std::vector<float>>;

inline HostWeights RandomHostWeights(const TransformerConfig& c, uint32_t seed) {
  std::mt19937 gen(seed);
  HostWeights w;
  for (const WeightSpec& s : CausalLmWeightSpecs(c)) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    // Linear layers ~ U(+-1/sqrt(in)) keep activations O(1); norm weights in [0.7, 1.3] so a
    // skipped or misapplied norm weight shows.
    const bool norm = s.shape.size() == 1;
    const float bound = norm ? 0.3f : (s.name.find("embed") != std::string::npos
                                           ? 1.f
                                           : 1.f / std::sqrt(static_cast<float>(s.shape[1])));
    std::uniform_real_distribution<float> dist(norm ? 1.f - bound : -bound, norm ? 1.f + bound
                                                                                 : bound);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = kernels::RoundBf16(dist(gen));
    w[s.name] = std::move(v);
  }
  return w;
}

// Writes config.json + model.safetensors into `dir`. Norm weights and every o_proj are
// stored as F32 (the loader converts), everything else as BF16.
// The fused tensors of a MoE layer (`name` ends in mlp.experts.gate_up_proj or down_proj)
// assembled from the per-expert host weights.
inline std::vector<float> FusedExperts(const TransformerConfig& c, const HostWeights& w,
                                       const std::string& name) {
  const std::string prefix = name.substr(0, name.rfind('.') + 1);  // "...mlp.experts."
  const bool down = name.ends_with("down_proj");
  std::vector<float> v;
  for (int64_t x = 0; x < c.moe->num_experts; ++x)
    for (const char* proj : down ? std::vector<const char*>{"down_proj"}
                                 : std::vector<const char*>{"gate_proj", "up_proj"}) {
      const std::vector<float>& e = w.at(prefix + std::to_string(x) + "." + proj + ".weight");
      v.insert(v.end(), e.begin(), e.end());
    }
  return v;
}

inline Status WriteCheckpoint(const std::string& dir, const TransformerConfig& c,
                              const HostWeights& w,
                              ExpertLayout layout = ExpertLayout::kPerExpert) {
  std::ofstream(dir + "/config.json") << TransformerConfigToJson(c).dump(2);
  std::vector<std::vector<kernels::bf16>> bf;
  std::vector<std::vector<float>> fused;
  std::vector<TensorToWrite> out;
  bf.reserve(w.size() + 1);
  fused.reserve(w.size() + 1);
  for (const WeightSpec& s : CausalLmWeightSpecs(c, layout)) {
    if (!w.contains(s.name) && s.shape.size() != 3) continue;  // a test removed it
    if (s.shape.size() == 3) fused.push_back(FusedExperts(c, w, s.name));
    const std::vector<float>& v = s.shape.size() == 3 ? fused.back() : w.at(s.name);
    const bool f32 = s.shape.size() == 1 || s.name.find("o_proj") != std::string::npos;
    TensorToWrite t{s.name, f32 ? kernels::DType::kF32 : kernels::DType::kBF16, s.shape, {}};
    if (f32) {
      t.data = std::as_bytes(std::span(v));
    } else {
      bf.emplace_back();
      for (float x : v) bf.back().push_back(kernels::bf16(x));
      t.data = std::as_bytes(std::span(bf.back()));
    }
    out.push_back(t);
  }
  return WriteSafetensors(dir + "/model.safetensors", out);
}

// A packed batch of documents with the given lengths and random token ids.
struct HostBatch {
  std::vector<int32_t> ids, pos, cu;
  int max_seqlen = 0;
};

inline HostBatch MakeBatch(const std::vector<int>& doc_lengths, int64_t vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab) - 1);
  HostBatch b;
  b.cu.push_back(0);
  for (int len : doc_lengths) {
    for (int i = 0; i < len; ++i) {
      b.ids.push_back(tok(gen));
      b.pos.push_back(i);
    }
    b.cu.push_back(b.cu.back() + len);
    b.max_seqlen = std::max(b.max_seqlen, len);
  }
  return b;
}

// `b` as a PackedBatch of host views (b must outlive it).
inline PackedBatch HostPacked(HostBatch& b) {
  const int64_t t = static_cast<int64_t>(b.ids.size());
  return PackedBatch{kernels::TensorView(b.ids.data(), kernels::DType::kI32, {t}),
                     kernels::TensorView(b.pos.data(), kernels::DType::kI32, {t}),
                     kernels::TensorView(b.cu.data(), kernels::DType::kI32,
                                         {static_cast<int64_t>(b.cu.size())}),
                     b.max_seqlen};
}

// float64 forward. Returns the output of every decoder layer ([T*H] each) and, last, the
// logits [T*V].
struct RefOutputs {
  std::vector<std::vector<double>> hidden;
  std::vector<double> logits;
};

inline RefOutputs ReferenceForward(const TransformerConfig& c, const HostWeights& w,
                                   const HostBatch& b) {
  const int64_t t = static_cast<int64_t>(b.ids.size()), h = c.hidden_size,
                hq = c.num_attention_heads, hk = c.num_key_value_heads, d = c.head_dim,
                ff = c.intermediate_size, v = c.vocab_size;
  auto weight = [&](const std::string& name) -> const std::vector<float>& { return w.at(name); };
  // y[r, o] = sum_i x[r, i] W[o, i]
  auto linear = [](const std::vector<double>& x, const std::vector<float>& wt, int64_t rows,
                   int64_t in, int64_t out) {
    std::vector<double> y(static_cast<size_t>(rows * out), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out; ++o) {
        double acc = 0;
        for (int64_t i = 0; i < in; ++i) acc += x[r * in + i] * wt[o * in + i];
        y[r * out + o] = acc;
      }
    return y;
  };
  // RMSNorm over groups of `n` consecutive values.
  auto rmsnorm = [&](const std::vector<double>& x, const std::vector<float>& wt, int64_t n) {
    std::vector<double> y(x.size());
    for (size_t r = 0; r < x.size() / n; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += x[r * n + i] * x[r * n + i];
      const double rstd = 1.0 / std::sqrt(ss / n + c.rms_norm_eps);
      for (int64_t i = 0; i < n; ++i) y[r * n + i] = x[r * n + i] * rstd * wt[i];
    }
    return y;
  };
  // rotate_half RoPE in place on [T, heads, d].
  auto rope = [&](std::vector<double>& x, int64_t heads) {
    const int64_t half = d / 2;
    for (int64_t tok = 0; tok < t; ++tok)
      for (int64_t hh = 0; hh < heads; ++hh) {
        double* p = &x[(tok * heads + hh) * d];
        for (int64_t i = 0; i < half; ++i) {
          const double a = b.pos[tok] * std::pow(c.rope_theta, -2.0 * i / d);
          const double x1 = p[i], x2 = p[i + half];
          p[i] = x1 * std::cos(a) - x2 * std::sin(a);
          p[i + half] = x2 * std::cos(a) + x1 * std::sin(a);
        }
      }
  };

  RefOutputs out;
  std::vector<double> x(static_cast<size_t>(t * h));
  const std::vector<float>& emb = weight("model.embed_tokens.weight");
  for (int64_t tok = 0; tok < t; ++tok)
    for (int64_t i = 0; i < h; ++i) x[tok * h + i] = emb[b.ids[tok] * h + i];
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    std::vector<double> n = rmsnorm(x, weight(p + "input_layernorm.weight"), h);
    std::vector<double> q = linear(n, weight(p + "self_attn.q_proj.weight"), t, h, hq * d);
    std::vector<double> k = linear(n, weight(p + "self_attn.k_proj.weight"), t, h, hk * d);
    std::vector<double> val = linear(n, weight(p + "self_attn.v_proj.weight"), t, h, hk * d);
    if (c.qk_norm) {
      q = rmsnorm(q, weight(p + "self_attn.q_norm.weight"), d);
      k = rmsnorm(k, weight(p + "self_attn.k_norm.weight"), d);
    }
    rope(q, hq);
    rope(k, hk);
    std::vector<double> attn(static_cast<size_t>(t * hq * d), 0.0);
    for (size_t doc = 0; doc + 1 < b.cu.size(); ++doc) {
      for (int64_t i = b.cu[doc]; i < b.cu[doc + 1]; ++i)
        for (int64_t hh = 0; hh < hq; ++hh) {
          const int64_t kh = hh / (hq / hk);
          std::vector<double> s;
          double mx = -1e300;
          for (int64_t j = b.cu[doc]; j <= i; ++j) {
            double dot = 0;
            for (int64_t e = 0; e < d; ++e)
              dot += q[(i * hq + hh) * d + e] * k[(j * hk + kh) * d + e];
            s.push_back(dot / std::sqrt(static_cast<double>(d)));
            mx = std::max(mx, s.back());
          }
          double z = 0;
          for (double& e : s) z += (e = std::exp(e - mx));
          for (int64_t j = b.cu[doc]; j <= i; ++j)
            for (int64_t e = 0; e < d; ++e)
              attn[(i * hq + hh) * d + e] += s[j - b.cu[doc]] / z * val[(j * hk + kh) * d + e];
        }
    }
    std::vector<double> o = linear(attn, weight(p + "self_attn.o_proj.weight"), t, hq * d, h);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    n = rmsnorm(x, weight(p + "post_attention_layernorm.weight"), h);
    if (c.IsMoeLayer(l)) {  // softmax over the router's logits, top-k, weighted experts
      const int64_t e = c.moe->num_experts, mi = c.moe->moe_intermediate_size;
      const std::vector<double> logits = linear(n, weight(p + "mlp.gate.weight"), t, h, e);
      for (int64_t tok = 0; tok < t; ++tok) {
        std::vector<int32_t> ids;
        std::vector<double> rw;
        kernels::testing::RouteRef({logits.begin() + tok * e, logits.begin() + (tok + 1) * e},
                                   c.moe->num_experts_per_tok, c.moe->norm_topk_prob, &ids,
                                   &rw);
        const std::vector<double> xn(n.begin() + tok * h, n.begin() + (tok + 1) * h);
        for (size_t j = 0; j < ids.size(); ++j) {
          const std::string q = p + "mlp.experts." + std::to_string(ids[j]) + ".";
          std::vector<double> g = linear(xn, weight(q + "gate_proj.weight"), 1, h, mi);
          const std::vector<double> u = linear(xn, weight(q + "up_proj.weight"), 1, h, mi);
          for (int64_t i = 0; i < mi; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
          const std::vector<double> y = linear(g, weight(q + "down_proj.weight"), 1, mi, h);
          for (int64_t i = 0; i < h; ++i) x[tok * h + i] += rw[j] * y[i];
        }
      }
      out.hidden.push_back(x);
      continue;
    }
    std::vector<double> g = linear(n, weight(p + "mlp.gate_proj.weight"), t, h, ff);
    std::vector<double> u = linear(n, weight(p + "mlp.up_proj.weight"), t, h, ff);
    for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    std::vector<double> dn = linear(g, weight(p + "mlp.down_proj.weight"), t, ff, h);
    for (size_t i = 0; i < x.size(); ++i) x[i] += dn[i];
    out.hidden.push_back(x);
  }
  const std::vector<double> n = rmsnorm(x, weight("model.norm.weight"), h);
  out.logits = linear(n,
                      weight(c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"),
                      t, h, v);
  return out;
}

}  // namespace tandem::models::testing
