// CPU reference of decode_attention.h: two passes per query row (scores, then the
// softmax-weighted sum), the same arithmetic order as the packed causal CPU reference.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention/decode_attention.h"

namespace tandem::kernels {

Result<CachedAttentionDims> CheckCachedAttention(const char* op, const TensorView& q,
                                                 const TensorView& k, const TensorView& v,
                                                 const TensorView& out) {
  const TensorView* all[] = {&q, &k, &v, &out};
  const char* names[] = {"q", "k", "v", "out"};
  for (int i = 0; i < 4; ++i) {
    if (all[i]->ndim() != 3)
      return InvalidArgumentError("{}: {} must have 3 dims, got {}", op, names[i],
                                  all[i]->ToString());
    RETURN_IF_ERROR(ExpectDType(op, names[i], *all[i], DType::kBF16));
    RETURN_IF_ERROR(ExpectContiguous(op, names[i], *all[i]));
    if (!(all[i]->device() == q.device()))
      return InvalidArgumentError("{}: {} is on another device than q ({})", op, names[i],
                                  all[i]->ToString());
  }
  CachedAttentionDims d{q.dim(0), k.dim(0), q.dim(1), k.dim(1), q.dim(2)};
  if (d.hk < 1 || d.hq % d.hk != 0)
    return InvalidArgumentError("{}: hq ({}) must be a multiple of hk ({})", op, d.hq, d.hk);
  if (d.b < 1 || d.p < d.b)
    return InvalidArgumentError("{}: {} queries need 1 <= B <= P keys, got P = {}", op, d.b,
                                d.p);
  RETURN_IF_ERROR(ExpectShape(op, "k", k, Shape{d.p, d.hk, d.d}));
  RETURN_IF_ERROR(ExpectShape(op, "v", v, Shape{d.p, d.hk, d.d}));
  RETURN_IF_ERROR(ExpectShape(op, "out", out, Shape{d.b, d.hq, d.d}));
  return d;
}

Status CachedCausalAttentionForwardCpu(const TensorView& q, const TensorView& k,
                                       const TensorView& v, float scale, TensorView out,
                                       Stream) {
  constexpr const char* kOp = "CachedCausalAttentionForwardCpu";
  ASSIGN_OR_RETURN(CachedAttentionDims dims, CheckCachedAttention(kOp, q, k, v, out));
  if (!q.device().is_cpu()) return InvalidArgumentError("{}: tensors must be on the host", kOp);
  const int64_t d = dims.d, group = dims.hq / dims.hk, past = dims.p - dims.b;
  const float sc = scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(d));
  const bf16* qp = q.data_as<bf16>();
  const bf16* kp = k.data_as<bf16>();
  const bf16* vp = v.data_as<bf16>();
  std::vector<float> p, acc(d);
  for (int64_t i = 0; i < dims.b; ++i) {
    const int64_t last = past + i;  // the newest key query i sees
    for (int64_t h = 0; h < dims.hq; ++h) {
      const int64_t kh = h / group;
      const bf16* qi = qp + (i * dims.hq + h) * d;
      p.assign(last + 1, 0.0f);
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j <= last; ++j) {
        const bf16* kj = kp + (j * dims.hk + kh) * d;
        float s = 0.0f;
        for (int64_t c = 0; c < d; ++c) s += qi[c].f() * kj[c].f();
        p[j] = sc * s;
        m = std::max(m, p[j]);
      }
      float l = 0.0f;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j <= last; ++j) {
        const float w = std::exp(p[j] - m);
        l += w;
        const bf16* vj = vp + (j * dims.hk + kh) * d;
        for (int64_t c = 0; c < d; ++c) acc[c] += w * vj[c].f();
      }
      bf16* oi = out.data_as<bf16>() + (i * dims.hq + h) * d;
      for (int64_t c = 0; c < d; ++c) oi[c] = bf16(acc[c] / l);
    }
  }
  return Status::Ok();
}

#ifndef TANDEM_HAVE_CUDA
Status CachedCausalAttentionForward(const TensorView& q, const TensorView& k,
                                    const TensorView& v, float scale, TensorView out,
                                    Stream stream) {
  if (q.device().is_cpu()) return CachedCausalAttentionForwardCpu(q, k, v, scale, out, stream);
  return UnavailableError("CachedCausalAttentionForward: CUDA tensors in a build without CUDA");
}
#endif

}  // namespace tandem::kernels
