// Test-only utilities of kernels/moe: a float64 reference of one MoE block computed token by
// token (no permutation: the definition, not the algorithm), and random problems whose
// routing can be skewed so that one expert takes every token; and how often two routings
// pick different expert sets (the MoE targets' goldens).
// Thread-safety: free functions on caller-owned data.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "kernels/core/dtype.h"
#include "kernels/moe/moe_layer.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels::testing {

// Host copies of a MoE block's inputs and weights (bf16), shapes of `s`.
struct MoeProblem {
  MoeLayerShape s;
  int64_t tokens = 0;
  std::vector<bf16> x, hidden, router, gate_up, down, shared_gate_up, shared_down, shared_gate;
};

// Random problem. `favourite` >= 0 adds a large bias towards that expert to every token's
// router logit (the router row gets +3 on a direction all x share), so with top_k 1 it takes
// every token.
inline MoeProblem RandomMoeProblem(const MoeLayerShape& s, int64_t tokens, uint64_t seed,
                                   int64_t favourite = -1) {
  MoeProblem p;
  p.s = s;
  p.tokens = tokens;
  const int64_t h = s.hidden, e = s.experts, i = s.expert_size, is = s.shared_size;
  const float wb = 1.f / std::sqrt(static_cast<float>(h));
  p.x = RandomBf16(tokens * h, seed);
  p.hidden = RandomBf16(tokens * h, seed + 1);
  p.router = RandomBf16(e * h, seed + 2, -wb, wb);
  p.gate_up = RandomBf16(e * 2 * i * h, seed + 3, -wb, wb);
  p.down = RandomBf16(e * h * i, seed + 4, -1.f / std::sqrt(static_cast<float>(i)),
                      1.f / std::sqrt(static_cast<float>(i)));
  if (favourite >= 0) {
    for (int64_t t = 0; t < tokens; ++t) p.x[t * h] = bf16(4.f);  // a shared direction
    p.router[favourite * h] = bf16(8.f);
  }
  if (is > 0) {
    p.shared_gate_up = RandomBf16(2 * is * h, seed + 5, -wb, wb);
    p.shared_down = RandomBf16(h * is, seed + 6, -wb, wb);
    p.shared_gate = RandomBf16(h, seed + 7, -wb, wb);
  }
  return p;
}

inline double Silu(double g) { return g / (1.0 + std::exp(-g)); }

// out[r] = W [rows, cols] x: float64 over bf16 inputs.
inline std::vector<double> MatVec(const bf16* w, int64_t rows, int64_t cols,
                                  const std::vector<double>& x) {
  std::vector<double> out(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[r] += static_cast<double>(w[r * cols + c].f()) * x[c];
  return out;
}

// SwiGLU MLP of x with gate|up [2I, H] and down [H, I].
inline std::vector<double> MlpRef(const bf16* gate_up, const bf16* down, int64_t h, int64_t i,
                                  const std::vector<double>& x) {
  const std::vector<double> gu = MatVec(gate_up, 2 * i, h, x);
  std::vector<double> a(static_cast<size_t>(i));
  for (int64_t c = 0; c < i; ++c) a[c] = Silu(gu[c]) * gu[i + c];
  return MatVec(down, h, i, a);
}

// The experts each token picks (descending probability, ties to the lower index) and its
// weights, from float64 logits.
inline void RouteRef(const std::vector<double>& logits, int64_t k, bool normalize,
                     std::vector<int32_t>* ids, std::vector<double>* w) {
  const int64_t e = static_cast<int64_t>(logits.size());
  std::vector<int32_t> order(static_cast<size_t>(e));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  const double mx = logits[order[0]];
  double sum = 0, picked = 0;
  for (double l : logits) sum += std::exp(l - mx);
  ids->assign(order.begin(), order.begin() + k);
  w->clear();
  for (int64_t j = 0; j < k; ++j) {
    w->push_back(std::exp(logits[order[j]] - mx) / sum);
    picked += w->back();
  }
  if (normalize)
    for (double& v : *w) v /= picked;
}

// hidden + MoE(x) per token, float64 (the router's logits too).
inline std::vector<double> MoeBlockRef(const MoeProblem& p) {
  const MoeLayerShape& s = p.s;
  const int64_t h = s.hidden, i = s.expert_size;
  std::vector<double> out(static_cast<size_t>(p.tokens * h));
  for (int64_t t = 0; t < p.tokens; ++t) {
    std::vector<double> x(static_cast<size_t>(h));
    for (int64_t c = 0; c < h; ++c) x[c] = p.x[t * h + c].f();
    std::vector<int32_t> ids;
    std::vector<double> w;
    RouteRef(MatVec(p.router.data(), s.experts, h, x), s.top_k, s.normalize, &ids, &w);
    std::vector<double> acc(static_cast<size_t>(h), 0.0);
    for (size_t j = 0; j < ids.size(); ++j) {
      const std::vector<double> y = MlpRef(p.gate_up.data() + ids[j] * 2 * i * h,
                                           p.down.data() + ids[j] * h * i, h, i, x);
      for (int64_t c = 0; c < h; ++c) acc[c] += w[j] * y[c];
    }
    if (s.shared_size > 0) {
      const std::vector<double> y =
          MlpRef(p.shared_gate_up.data(), p.shared_down.data(), h, s.shared_size, x);
      const double g = MatVec(p.shared_gate.data(), 1, h, x)[0];
      for (int64_t c = 0; c < h; ++c) acc[c] += y[c] / (1.0 + std::exp(-g));
    }
    for (int64_t c = 0; c < h; ++c) out[t * h + c] = p.hidden[t * h + c].f() + acc[c];
  }
  return out;
}

// Runs MoeLayer on `p` with buffers from `alloc` (its device; `gemm` for CUDA, else null),
// its expert GEMMs on `path` (with p.s.fp8: the FP8 experts, quantized from p's); returns the updated hidden rows and, through `ids`, the routing
// it chose.
inline std::vector<bf16> RunMoeLayer(Allocator& alloc, GemmContext* gemm, const MoeProblem& p,
                                     std::vector<int32_t>* ids = nullptr,
                                     MoeExpertsPath path = MoeExpertsPath::kAuto) {
  const MoeLayerShape& s = p.s;
  const int64_t h = s.hidden, e = s.experts, i = s.expert_size, is = s.shared_size;
  auto make = [&](const std::vector<bf16>& v, Shape shape) {
    return MakeTensor<bf16>(alloc, DType::kBF16, shape, v);
  };
  Tensor x = make(p.x, {p.tokens, h}), hidden = make(p.hidden, {p.tokens, h});
  Tensor router = make(p.router, {e, h}), gate_up = make(p.gate_up, {e, 2 * i, h}),
         down = make(p.down, {e, h, i});
  Tensor sgu, sdown, sgate;
  MoeLayerWeights w;
  w.router = router;
  w.experts = {gate_up, down};
  if (is > 0) {
    sgu = make(p.shared_gate_up, {2 * is, h});
    sdown = make(p.shared_down, {h, is});
    sgate = make(p.shared_gate, {1, h});
    w.shared_gate_up = sgu;
    w.shared_down = sdown;
    w.shared_gate = sgate;
  }
  // s.fp8: the routed and shared experts quantized to e4m3 on alloc's device.
  Tensor w8;
  if (s.fp8) {
    const int64_t shared = is > 0 ? Fp8BlockWeightBytes(2 * is, h) + Fp8BlockWeightBytes(h, is)
                                  : 0;
    Result<Tensor> t = Tensor::Empty(alloc, DType::kU8, {MoeFp8ExpertBytes(e, i, h) + shared});
    TANDEM_CHECK_OK(t.status());
    w8 = std::move(t).value();
    int64_t off = 0;
    w.experts8 = CarveMoeFp8Experts(w8.data(), &off, e, i, h, alloc.device());
    TANDEM_CHECK_OK(QuantizeMoeFp8Experts(w.experts, w.experts8, nullptr));
    w.experts = {};
    if (is > 0) {
      w.shared_gate_up8 = CarveFp8BlockWeight(w8.data(), &off, 2 * is, h, alloc.device());
      w.shared_down8 = CarveFp8BlockWeight(w8.data(), &off, h, is, alloc.device());
      TANDEM_CHECK_OK(QuantizeFp8Weight(w.shared_gate_up, w.shared_gate_up8, nullptr));
      TANDEM_CHECK_OK(QuantizeFp8Weight(w.shared_down, w.shared_down8, nullptr));
      w.shared_gate_up = w.shared_down = TensorView();
    }
  }
  Result<std::unique_ptr<MoeLayer>> layer = MoeLayer::Create(s, p.tokens + 3, alloc, nullptr, path);
  TANDEM_CHECK_OK(layer.status());
  TANDEM_CHECK_OK((*layer)->Forward(gemm, w, x, hidden, nullptr));
  if (ids != nullptr) *ids = ToHost<int32_t>((*layer)->topk_ids(p.tokens));
  return ToHost<bf16>(hidden);
}

// The share of tokens whose top-k expert set (order ignored) differs between `got` and
// `want` (i32 [T, k] each): the router-agreement measure of the MoE target goldens.
inline double RouterSetsDiffer(std::vector<int32_t> got, std::vector<int32_t> want, int64_t k) {
  int64_t differ = 0;
  const int64_t t = static_cast<int64_t>(want.size()) / k;
  for (int64_t r = 0; r < t; ++r) {
    std::sort(got.begin() + r * k, got.begin() + (r + 1) * k);
    std::sort(want.begin() + r * k, want.begin() + (r + 1) * k);
    differ += !std::equal(got.begin() + r * k, got.begin() + (r + 1) * k, want.begin() + r * k);
  }
  return t == 0 ? 0.0 : static_cast<double>(differ) / static_cast<double>(t);
}

}  // namespace tandem::kernels::testing
