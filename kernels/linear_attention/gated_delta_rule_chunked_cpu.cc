// CPU twin of the chunked gated delta rule (gated_delta_rule_chunked.h) in float64: the
// chunk algebra step by step, one document and value head at a time, so the CUDA kernel's
// algorithm can be checked against the recurrent reference without a GPU.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/linear_attention/gated_delta_rule_chunked.h"
#include "kernels/linear_attention/hybrid_ops.h"

namespace tandem::kernels {
namespace {

using Mat = std::vector<double>;  // row-major

template <typename T>
const T* Row(const TensorView& t, int64_t r) {
  return t.data_as<T>() + r * t.stride(0);
}

// Row r (length n) of q or k for head `h`, L2-normalised when asked, times `scale`.
void LoadRow(const TensorView& x, int64_t r, int64_t h, int64_t n, bool l2, double scale,
             double* out) {
  const bf16* p = Row<bf16>(x, r) + h * n;
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = p[i].f();
    ss += out[i] * out[i];
  }
  const double f = (l2 ? 1.0 / std::sqrt(ss + 1e-6) : 1.0) * scale;
  for (int64_t i = 0; i < n; ++i) out[i] *= f;
}

void Store(const TensorView& out, int64_t t, int64_t col, const double* o, int64_t n) {
  if (out.dtype() == DType::kF32) {
    float* d = out.data_as<float>() + t * out.stride(0) + col;
    for (int64_t i = 0; i < n; ++i) d[i] = static_cast<float>(o[i]);
  } else {
    bf16* d = out.data_as<bf16>() + t * out.stride(0) + col;
    for (int64_t i = 0; i < n; ++i) d[i] = bf16(static_cast<float>(o[i]));
  }
}

// One chunk [b, b + n) of value head vh; S [dk, dv] carries in and out.
void RunChunk(const GatedDeltaRuleArgs& a, int64_t b, int64_t n, int64_t vh, Mat& S) {
  const int64_t dk = a.key_dim, dv = a.value_dim;
  const int64_t kh = vh / (a.value_heads / a.key_heads);
  const double scale = a.scale != 0.f ? a.scale : 1.0 / std::sqrt(static_cast<double>(dk));
  Mat q(n * dk), k(n * dk), v(n * dv), gc(n), beta(n);
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) {
    LoadRow(a.q, b + i, kh, dk, a.l2norm_qk, scale, &q[i * dk]);
    LoadRow(a.k, b + i, kh, dk, a.l2norm_qk, 1.0, &k[i * dk]);
    for (int64_t j = 0; j < dv; ++j) v[i * dv + j] = Row<bf16>(a.v, b + i)[vh * dv + j].f();
    acc += Row<float>(a.g, b + i)[vh];
    gc[i] = acc;
    beta[i] = Row<float>(a.beta, b + i)[vh];
  }
  auto dot = [&](const double* x, const double* y) {
    double s = 0;
    for (int64_t i = 0; i < dk; ++i) s += x[i] * y[i];
    return s;
  };
  // T = (I + A)^-1 by forward substitution: T[i,:] = e_i - sum_{j<i} A[i,j] T[j,:].
  Mat A(n * n, 0.0), T(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < i; ++j)
      A[i * n + j] = beta[i] * dot(&k[i * dk], &k[j * dk]) * std::exp(gc[i] - gc[j]);
  for (int64_t i = 0; i < n; ++i) {
    T[i * n + i] = 1.0;
    for (int64_t j = 0; j < i; ++j)
      for (int64_t c = 0; c <= j; ++c) T[i * n + c] -= A[i * n + j] * T[j * n + c];
  }
  // v' = u - w S with u = T (beta v), w = T (beta exp(gc) k).
  Mat vn(n * dv, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j <= i; ++j) {
      const double t = T[i * n + j] * beta[j];
      for (int64_t c = 0; c < dv; ++c) vn[i * dv + c] += t * v[j * dv + c];
      const double tw = t * std::exp(gc[j]);
      for (int64_t r = 0; r < dk; ++r)
        for (int64_t c = 0; c < dv; ++c) vn[i * dv + c] -= tw * k[j * dk + r] * S[r * dv + c];
    }
  }
  // o = exp(gc) (q S) + (q k^T exp(gc_i - gc_j), j <= i) v'.
  std::vector<double> o(dv);
  for (int64_t i = 0; i < n; ++i) {
    std::fill(o.begin(), o.end(), 0.0);
    const double gi = std::exp(gc[i]);
    for (int64_t r = 0; r < dk; ++r)
      for (int64_t c = 0; c < dv; ++c) o[c] += gi * q[i * dk + r] * S[r * dv + c];
    for (int64_t j = 0; j <= i; ++j) {
      const double w = dot(&q[i * dk], &k[j * dk]) * std::exp(gc[i] - gc[j]);
      for (int64_t c = 0; c < dv; ++c) o[c] += w * vn[j * dv + c];
    }
    Store(a.out, b + i, vh * dv, o.data(), dv);
  }
  // S = exp(gc_last) S + (k exp(gc_last - gc))^T v'.
  const double last = gc[n - 1];
  for (double& s : S) s *= std::exp(last);
  for (int64_t j = 0; j < n; ++j) {
    const double d = std::exp(last - gc[j]);
    for (int64_t r = 0; r < dk; ++r)
      for (int64_t c = 0; c < dv; ++c) S[r * dv + c] += d * k[j * dk + r] * vn[j * dv + c];
  }
}

}  // namespace

int64_t GatedDeltaRuleChunkedWorkspaceBytes(int64_t tokens, int64_t key_heads,
                                            int64_t value_heads, int64_t /*key_dim*/,
                                            int64_t /*value_dim*/) {
  // Sections (gated_delta_rule_chunked_device.cuh's Carve), each 256-byte aligned: T diag(beta)
  // and the masked Q K^T (bf16 chunk rows per value head), q's and k's inverse norms (f32 per
  // key head), gc (f32 per value head). The head dims do not enter (the kernel takes 128 only).
  const auto align = [](int64_t b) { return (b + 255) / 256 * 256; };
  const int64_t vt = value_heads * tokens, kt = key_heads * tokens;
  return std::max<int64_t>(2 * align(vt * kGatedDeltaRuleChunk * 2) + 2 * align(kt * 4) +
                               align(vt * 4),
                           256);
}

namespace cpu {

Status GatedDeltaRuleChunkedForward(const GatedDeltaRuleArgs& args, int64_t chunk, Stream) {
  int64_t t = 0;
  RETURN_IF_ERROR(internal::CheckGatedDeltaRule(args, &t));
  RETURN_IF_ERROR(internal::CheckHostCuSeqlens("GatedDeltaRuleChunkedForward", args.cu_seqlens, t));
  if (chunk < 1)
    return InvalidArgumentError("GatedDeltaRuleChunkedForward: chunk must be >= 1, got {}", chunk);
  const int32_t* cu = args.cu_seqlens.data_as<int32_t>();
  Mat S(static_cast<size_t>(args.key_dim * args.value_dim));
  for (int64_t d = 0; d + 1 < args.cu_seqlens.dim(0); ++d) {
    for (int64_t vh = 0; vh < args.value_heads; ++vh) {
      std::fill(S.begin(), S.end(), 0.0);  // restarts per document
      for (int64_t b = cu[d]; b < cu[d + 1]; b += chunk)
        RunChunk(args, b, std::min<int64_t>(chunk, cu[d + 1] - b), vh, S);
    }
  }
  return Status::Ok();
}

}  // namespace cpu

Status GatedDeltaRuleChunkedForward(const GatedDeltaRuleArgs& args, TensorView workspace,
                                    Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device device,
                   DispatchDevice("GatedDeltaRuleChunkedForward",
                                  {args.q, args.k, args.v, args.g, args.beta, args.cu_seqlens,
                                   args.out}));
#ifdef TANDEM_HAVE_CUDA
  if (device.is_cuda()) return cuda::GatedDeltaRuleChunkedForward(args, workspace, s);
#endif
  return cpu::GatedDeltaRuleChunkedForward(args, kGatedDeltaRuleChunk, s);
}

}  // namespace tandem::kernels
