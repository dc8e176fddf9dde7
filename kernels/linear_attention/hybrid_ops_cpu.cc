// CPU references for kernels/linear_attention/hybrid_ops.h (fp32 math, one bf16 rounding at
// each output), the shared argument checks, and the dispatchers.
#include <cmath>
#include <vector>

#include "kernels/linear_attention/hybrid_ops.h"

namespace tandem::kernels {
namespace internal {

Status CheckRowView(const char* op, const char* what, const TensorView& t, DType dtype,
                    int64_t rows, int64_t cols) {
  RETURN_IF_ERROR(ExpectDType(op, what, t, dtype));
  const bool shape_ok = t.ndim() == 2 && (rows < 0 || t.dim(0) == rows) &&
                        (cols < 0 || t.dim(1) == cols) && t.dim(1) >= 1;
  if (!shape_ok || t.stride(1) != 1 || (t.dim(0) > 1 && t.stride(0) < t.dim(1)))
    return InvalidArgumentError(
        "{}: {}: expected a 2-D [{}, {}] view with unit column stride, got {}", op, what,
        rows < 0 ? std::string("rows") : std::to_string(rows),
        cols < 0 ? std::string("cols") : std::to_string(cols), t.ToString());
  return Status::Ok();
}

Status CheckHostCuSeqlens(const char* op, const TensorView& cu, int64_t tokens) {
  RETURN_IF_ERROR(ExpectDType(op, "cu_seqlens", cu, DType::kI32));
  RETURN_IF_ERROR(ExpectContiguous(op, "cu_seqlens", cu));
  if (cu.ndim() != 1 || cu.dim(0) < 2)
    return InvalidArgumentError("{}: cu_seqlens must be i32 [docs+1] with docs >= 1, got {}", op,
                                cu.ToString());
  if (!cu.device().is_cpu())
    return InvalidArgumentError("{}: cu_seqlens must be on the host here, got {}", op,
                                cu.ToString());
  const int32_t* c = cu.data_as<int32_t>();
  const int64_t n = cu.dim(0);
  if (c[0] != 0 || c[n - 1] != tokens)
    return InvalidArgumentError("{}: cu_seqlens must run from 0 to T = {}, got {} .. {}", op,
                                tokens, c[0], c[n - 1]);
  for (int64_t i = 0; i + 1 < n; ++i) {
    if (c[i + 1] < c[i])
      return InvalidArgumentError("{}: cu_seqlens decreases at entry {} ({} -> {})", op, i + 1,
                                  c[i], c[i + 1]);
  }
  return Status::Ok();
}

Status CheckCuSeqlensShape(const char* op, const TensorView& cu) {
  RETURN_IF_ERROR(ExpectDType(op, "cu_seqlens", cu, DType::kI32));
  RETURN_IF_ERROR(ExpectContiguous(op, "cu_seqlens", cu));
  if (cu.ndim() != 1 || cu.dim(0) < 2)
    return InvalidArgumentError("{}: cu_seqlens must be i32 [docs+1] with docs >= 1, got {}", op,
                                cu.ToString());
  return Status::Ok();
}

namespace {
Status CheckVector(const char* op, const char* what, const TensorView& t, int64_t n) {
  RETURN_IF_ERROR(ExpectDType(op, what, t, DType::kBF16));
  RETURN_IF_ERROR(ExpectContiguous(op, what, t));
  return ExpectShape(op, what, t, {n});
}
}  // namespace

Status CheckConv(const TensorView& out, const TensorView& x, const TensorView& w,
                 const TensorView& cu_seqlens, int64_t* k) {
  constexpr const char* kOp = "CausalConv1dSiluForward";
  RETURN_IF_ERROR(CheckRowView(kOp, "x", x, DType::kBF16, -1, -1));
  const int64_t c = x.dim(1);
  RETURN_IF_ERROR(CheckRowView(kOp, "out", out, DType::kBF16, x.dim(0), c));
  RETURN_IF_ERROR(ExpectDType(kOp, "w", w, DType::kBF16));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "w", w));
  if (w.ndim() != 2 || w.dim(0) != c || w.dim(1) < 1)
    return InvalidArgumentError("{}: w must be bf16 [{}, K], got {}", kOp, c, w.ToString());
  *k = w.dim(1);
  return CheckCuSeqlensShape(kOp, cu_seqlens);
}

Status CheckGates(const TensorView& g, const TensorView& beta, const TensorView& a,
                  const TensorView& b, const TensorView& a_log, const TensorView& dt_bias) {
  constexpr const char* kOp = "GatedDeltaGates";
  RETURN_IF_ERROR(CheckRowView(kOp, "a", a, DType::kBF16, -1, -1));
  const int64_t t = a.dim(0), h = a.dim(1);
  RETURN_IF_ERROR(CheckRowView(kOp, "b", b, DType::kBF16, t, h));
  RETURN_IF_ERROR(CheckRowView(kOp, "g", g, DType::kF32, t, h));
  RETURN_IF_ERROR(CheckRowView(kOp, "beta", beta, DType::kF32, t, h));
  RETURN_IF_ERROR(CheckVector(kOp, "A_log", a_log, h));
  return CheckVector(kOp, "dt_bias", dt_bias, h);
}

Status CheckGatedNorm(const TensorView& out, const TensorView& x, const TensorView& z,
                      const TensorView& w) {
  constexpr const char* kOp = "GatedRmsNormForward";
  RETURN_IF_ERROR(CheckRowView(kOp, "x", x, DType::kBF16, -1, -1));
  const int64_t t = x.dim(0), cols = x.dim(1);
  RETURN_IF_ERROR(CheckRowView(kOp, "z", z, DType::kBF16, t, cols));
  RETURN_IF_ERROR(CheckRowView(kOp, "out", out, DType::kBF16, t, cols));
  RETURN_IF_ERROR(ExpectDType(kOp, "w", w, DType::kBF16));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "w", w));
  if (w.ndim() != 1 || w.dim(0) < 1 || cols % w.dim(0) != 0)
    return InvalidArgumentError("{}: w must be bf16 [d] with d dividing {}, got {}", kOp, cols,
                                w.ToString());
  return Status::Ok();
}

Status CheckZeroCentredNorm(const TensorView& out, const TensorView& x, const TensorView& w) {
  constexpr const char* kOp = "ZeroCentredRmsNormForward";
  RETURN_IF_ERROR(CheckRowView(kOp, "x", x, DType::kBF16, -1, -1));
  RETURN_IF_ERROR(CheckRowView(kOp, "out", out, DType::kBF16, x.dim(0), x.dim(1)));
  return CheckVector(kOp, "w", w, x.dim(1));
}

Status CheckSigmoidGate(const TensorView& out, const TensorView& x, const TensorView& gate) {
  constexpr const char* kOp = "SigmoidGateForward";
  RETURN_IF_ERROR(CheckRowView(kOp, "x", x, DType::kBF16, -1, -1));
  RETURN_IF_ERROR(CheckRowView(kOp, "gate", gate, DType::kBF16, x.dim(0), x.dim(1)));
  return CheckRowView(kOp, "out", out, DType::kBF16, x.dim(0), x.dim(1));
}

}  // namespace internal

namespace {

float Sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }
float Silu(float x) { return x * Sigmoid(x); }
// torch's softplus (beta 1, threshold 20).
float Softplus(float x) { return x > 20.f ? x : std::log1p(std::exp(x)); }

template <typename T>
const T* Row(const TensorView& t, int64_t r) {
  return t.data_as<T>() + r * t.stride(0);
}
template <typename T>
T* MutRow(const TensorView& t, int64_t r) {
  return t.data_as<T>() + r * t.stride(0);
}

}  // namespace

namespace cpu {

Status CausalConv1dSiluForward(TensorView out, TensorView x, TensorView w, TensorView cu_seqlens,
                               Stream) {
  int64_t k = 0;
  RETURN_IF_ERROR(internal::CheckConv(out, x, w, cu_seqlens, &k));
  const int64_t t = x.dim(0), c = x.dim(1);
  RETURN_IF_ERROR(internal::CheckHostCuSeqlens("CausalConv1dSiluForward", cu_seqlens, t));
  std::vector<float> wf(static_cast<size_t>(c * k));
  for (int64_t i = 0; i < c * k; ++i) wf[i] = w.data_as<bf16>()[i].f();
  const int32_t* cu = cu_seqlens.data_as<int32_t>();
  std::vector<float> acc(static_cast<size_t>(c));
  for (int64_t d = 0; d + 1 < cu_seqlens.dim(0); ++d) {
    for (int64_t i = cu[d]; i < cu[d + 1]; ++i) {
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t src = i - (k - 1) + j;
        if (src < cu[d]) continue;  // before the document: zero padding
        const bf16* xr = Row<bf16>(x, src);
        for (int64_t ch = 0; ch < c; ++ch) acc[ch] += wf[ch * k + j] * xr[ch].f();
      }
      bf16* o = MutRow<bf16>(out, i);
      for (int64_t ch = 0; ch < c; ++ch) o[ch] = bf16(Silu(acc[ch]));
    }
  }
  return Status::Ok();
}

Status GatedDeltaGates(TensorView g, TensorView beta, TensorView a, TensorView b, TensorView a_log,
                       TensorView dt_bias, Stream) {
  RETURN_IF_ERROR(internal::CheckGates(g, beta, a, b, a_log, dt_bias));
  const int64_t t = a.dim(0), h = a.dim(1);
  for (int64_t i = 0; i < t; ++i) {
    const bf16 *ar = Row<bf16>(a, i), *br = Row<bf16>(b, i);
    float *gr = MutRow<float>(g, i), *betar = MutRow<float>(beta, i);
    for (int64_t j = 0; j < h; ++j) {
      const float decay = std::exp(a_log.data_as<bf16>()[j].f());
      gr[j] = -decay * Softplus(ar[j].f() + dt_bias.data_as<bf16>()[j].f());
      betar[j] = Sigmoid(br[j].f());
    }
  }
  return Status::Ok();
}

Status GatedRmsNormForward(TensorView out, TensorView x, TensorView z, TensorView w, float eps,
                           Stream) {
  RETURN_IF_ERROR(internal::CheckGatedNorm(out, x, z, w));
  const int64_t t = x.dim(0), cols = x.dim(1), d = w.dim(0);
  const bf16* wp = w.data_as<bf16>();
  for (int64_t i = 0; i < t; ++i) {
    const bf16 *xr = Row<bf16>(x, i), *zr = Row<bf16>(z, i);
    bf16* o = MutRow<bf16>(out, i);
    for (int64_t h0 = 0; h0 < cols; h0 += d) {
      float ss = 0.f;
      for (int64_t j = 0; j < d; ++j) ss += xr[h0 + j].f() * xr[h0 + j].f();
      const float rstd = 1.f / std::sqrt(ss / static_cast<float>(d) + eps);
      for (int64_t j = 0; j < d; ++j)
        o[h0 + j] = bf16(xr[h0 + j].f() * rstd * wp[j].f() * Silu(zr[h0 + j].f()));
    }
  }
  return Status::Ok();
}

Status ZeroCentredRmsNormForward(TensorView out, TensorView x, TensorView w, float eps, Stream) {
  RETURN_IF_ERROR(internal::CheckZeroCentredNorm(out, x, w));
  const int64_t rows = x.dim(0), d = x.dim(1);
  std::vector<float> scale(static_cast<size_t>(d));
  for (int64_t j = 0; j < d; ++j) scale[j] = 1.f + w.data_as<bf16>()[j].f();
  for (int64_t i = 0; i < rows; ++i) {
    const bf16* xr = Row<bf16>(x, i);
    bf16* o = MutRow<bf16>(out, i);
    float ss = 0.f;
    for (int64_t j = 0; j < d; ++j) ss += xr[j].f() * xr[j].f();
    const float rstd = 1.f / std::sqrt(ss / static_cast<float>(d) + eps);
    for (int64_t j = 0; j < d; ++j) o[j] = bf16(xr[j].f() * rstd * scale[j]);
  }
  return Status::Ok();
}

Status SigmoidGateForward(TensorView out, TensorView x, TensorView gate, Stream) {
  RETURN_IF_ERROR(internal::CheckSigmoidGate(out, x, gate));
  const int64_t rows = x.dim(0), cols = x.dim(1);
  for (int64_t i = 0; i < rows; ++i) {
    const bf16 *xr = Row<bf16>(x, i), *gr = Row<bf16>(gate, i);
    bf16* o = MutRow<bf16>(out, i);
    for (int64_t j = 0; j < cols; ++j) o[j] = bf16(xr[j].f() * Sigmoid(gr[j].f()));
  }
  return Status::Ok();
}

}  // namespace cpu

#ifdef TANDEM_HAVE_CUDA
#define TANDEM_DISPATCH(op, args, ...)                                 \
  ASSIGN_OR_RETURN(Device device, DispatchDevice(#op, {__VA_ARGS__})); \
  if (device.is_cuda()) return cuda::op args;
#else
#define TANDEM_DISPATCH(op, args, ...) RETURN_IF_ERROR(DispatchDevice(#op, {__VA_ARGS__}).status());
#endif

Status CausalConv1dSiluForward(TensorView out, TensorView x, TensorView w, TensorView cu_seqlens,
                               Stream s) {
  TANDEM_DISPATCH(CausalConv1dSiluForward, (out, x, w, cu_seqlens, s), out, x, w, cu_seqlens);
  return cpu::CausalConv1dSiluForward(out, x, w, cu_seqlens, s);
}

Status GatedDeltaGates(TensorView g, TensorView beta, TensorView a, TensorView b, TensorView a_log,
                       TensorView dt_bias, Stream s) {
  TANDEM_DISPATCH(GatedDeltaGates, (g, beta, a, b, a_log, dt_bias, s), g, beta, a, b, a_log,
                  dt_bias);
  return cpu::GatedDeltaGates(g, beta, a, b, a_log, dt_bias, s);
}

Status GatedRmsNormForward(TensorView out, TensorView x, TensorView z, TensorView w, float eps,
                           Stream s) {
  TANDEM_DISPATCH(GatedRmsNormForward, (out, x, z, w, eps, s), out, x, z, w);
  return cpu::GatedRmsNormForward(out, x, z, w, eps, s);
}

Status ZeroCentredRmsNormForward(TensorView out, TensorView x, TensorView w, float eps, Stream s) {
  TANDEM_DISPATCH(ZeroCentredRmsNormForward, (out, x, w, eps, s), out, x, w);
  return cpu::ZeroCentredRmsNormForward(out, x, w, eps, s);
}

Status SigmoidGateForward(TensorView out, TensorView x, TensorView gate, Stream s) {
  TANDEM_DISPATCH(SigmoidGateForward, (out, x, gate, s), out, x, gate);
  return cpu::SigmoidGateForward(out, x, gate, s);
}

#undef TANDEM_DISPATCH

}  // namespace tandem::kernels
