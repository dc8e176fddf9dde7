// CPU references for block-scaled FP8: quantize (amax per group -> scale = amax / 448 ->
// saturating round-to-nearest-even e4m3), dequantize, and a GEMM that dequantizes both
// operands to fp32 and accumulates in float64. Also the checks and device dispatch shared
// with the CUDA versions.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/gemm/fp8.h"

namespace tandem::kernels {
namespace {

float LoadFloat(const TensorView& t, int64_t r, int64_t c) {
  const int64_t i = r * t.stride(0) + c;
  return t.dtype() == DType::kF32 ? t.data_as<const float>()[i] : t.data_as<const bf16>()[i].f();
}

void StoreFloat(const TensorView& t, int64_t r, int64_t c, float v) {
  const int64_t i = r * t.stride(0) + c;
  if (t.dtype() == DType::kF32) t.data_as<float>()[i] = v;
  else t.data_as<bf16>()[i] = bf16(v);
}

float GroupScale(float amax) { return amax > 0.f ? amax / kE4m3Max : 1.f; }

// Quantizes rows [r0, r1) x cols [c0, c1) of `x` with one scale; returns that scale.
float QuantizeTile(const TensorView& x, const TensorView& q, int64_t r0, int64_t r1, int64_t c0,
                   int64_t c1) {
  float amax = 0.f;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(LoadFloat(x, r, c)));
  const float scale = GroupScale(amax);
  uint8_t* out = q.data_as<uint8_t>();
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t c = c0; c < c1; ++c) out[r * q.stride(0) + c] = FloatToE4m3(LoadFloat(x, r, c) / scale);
  return scale;
}

}  // namespace

namespace internal {
Status CheckFloatMatrix(const char* op, const char* what, const TensorView& t, int64_t rows,
                        int64_t cols) {
  if (t.dtype() != DType::kBF16 && t.dtype() != DType::kF32)
    return InvalidArgumentError("{}: {} must be bf16 or f32, got {}", op, what, t.ToString());
  if (t.ndim() != 2 || t.dim(0) != rows || t.dim(1) != cols || t.stride(1) != 1)
    return InvalidArgumentError("{}: {} must be [{}, {}] with unit column stride, got {}", op,
                                what, rows, cols, t.ToString());
  return Status::Ok();
}

}  // namespace internal

namespace {
constexpr int64_t kCarveAlign = 256;
int64_t CarveAlignUp(int64_t x) { return (x + kCarveAlign - 1) / kCarveAlign * kCarveAlign; }
}  // namespace

int64_t Fp8BlockWeightBytes(int64_t n, int64_t k) {
  return CarveAlignUp(n * k) + CarveAlignUp(Fp8Blocks(n) * Fp8WeightScaleLd(k) * 4);
}

Fp8BlockWeight CarveFp8BlockWeight(void* base, int64_t* offset, int64_t n, int64_t k,
                                   Device device) {
  char* b = static_cast<char*>(base);
  Fp8BlockWeight w;
  w.data = TensorView(b + *offset, DType::kF8E4M3, {n, k}, device);
  *offset += CarveAlignUp(n * k);
  w.scale = TensorView(b + *offset, DType::kF32, {Fp8Blocks(n), Fp8WeightScaleLd(k)}, device);
  *offset += CarveAlignUp(w.scale.nbytes());
  return w;
}

Status CheckFp8Weight(const char* op, const Fp8BlockWeight& w) {
  RETURN_IF_ERROR(ExpectDType(op, "fp8 weight", w.data, DType::kF8E4M3));
  if (w.data.ndim() != 2) return InvalidArgumentError("{}: fp8 weight must be 2-d", op);
  RETURN_IF_ERROR(ExpectContiguous(op, "fp8 weight", w.data));
  RETURN_IF_ERROR(ExpectDType(op, "fp8 weight scale", w.scale, DType::kF32));
  RETURN_IF_ERROR(ExpectShape(op, "fp8 weight scale", w.scale,
                              Shape{Fp8Blocks(w.rows()), Fp8WeightScaleLd(w.cols())}));
  RETURN_IF_ERROR(ExpectContiguous(op, "fp8 weight scale", w.scale));
  return ExpectSameDevice(op, w.data, w.scale);
}

Status CheckFp8Activation(const char* op, const Fp8GroupActivation& a) {
  RETURN_IF_ERROR(ExpectDType(op, "fp8 activation", a.data, DType::kF8E4M3));
  if (a.data.ndim() != 2 || a.data.stride(1) != 1 || a.data.stride(0) != a.data.dim(1) ||
      a.data.dim(0) % 4 != 0)
    return InvalidArgumentError(
        "{}: fp8 activation must be a dense 2-d [Mp, K] with Mp a multiple of 4, got {}", op,
        a.data.ToString());
  RETURN_IF_ERROR(ExpectDType(op, "fp8 activation scale", a.scale, DType::kF32));
  RETURN_IF_ERROR(ExpectContiguous(op, "fp8 activation scale", a.scale));
  const int64_t need = Fp8ActScaleElems(a.data.dim(0), a.data.dim(1));
  if (a.scale.numel() < need)
    return InvalidArgumentError("{}: activation scale has {} elements; [{}, {}] needs {}", op,
                                a.scale.numel(), a.data.dim(0), a.data.dim(1), need);
  return ExpectSameDevice(op, a.data, a.scale);
}

Status internal::CheckFp8Transpose(const char* op, const Fp8BlockWeight& w,
                                   const Fp8BlockWeight& wt) {
  RETURN_IF_ERROR(CheckFp8Weight(op, w));
  RETURN_IF_ERROR(CheckFp8Weight(op, wt));
  if (wt.rows() != w.cols() || wt.cols() != w.rows())
    return InvalidArgumentError("{}: wt {} is not the transpose of w {}", op, wt.data.ToString(),
                                w.data.ToString());
  return ExpectSameDevice(op, w.data, wt.data);
}

namespace cpu {

Status TransposeFp8Weight(const Fp8BlockWeight& w, const Fp8BlockWeight& wt, Stream) {
  RETURN_IF_ERROR(internal::CheckFp8Transpose("cpu::TransposeFp8Weight", w, wt));
  const int64_t n = w.rows(), k = w.cols();
  const uint8_t* q = w.data.data_as<const uint8_t>();
  uint8_t* qt = wt.data.data_as<uint8_t>();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) qt[c * n + r] = q[r * k + c];
  const float* sc = w.scale.data_as<const float>();
  float* sct = wt.scale.data_as<float>();
  const int64_t ld = w.scale.dim(1), ldt = wt.scale.dim(1);
  std::fill(sct, sct + wt.scale.numel(), 0.f);
  for (int64_t nb = 0; nb < Fp8Blocks(n); ++nb)
    for (int64_t kb = 0; kb < Fp8Blocks(k); ++kb) sct[kb * ldt + nb] = sc[nb * ld + kb];
  return Status::Ok();
}

Status QuantizeFp8Weight(const TensorView& w, const Fp8BlockWeight& out, Stream) {
  constexpr const char* kOp = "cpu::QuantizeFp8Weight";
  RETURN_IF_ERROR(CheckFp8Weight(kOp, out));
  RETURN_IF_ERROR(internal::CheckFloatMatrix(kOp, "w", w, out.rows(), out.cols()));
  const int64_t n = out.rows(), k = out.cols(), ld = out.scale.dim(1);
  float* scale = out.scale.data_as<float>();
  std::fill(scale, scale + out.scale.numel(), 0.f);
  for (int64_t nb = 0; nb < Fp8Blocks(n); ++nb)
    for (int64_t kb = 0; kb < Fp8Blocks(k); ++kb) {
      scale[nb * ld + kb] = QuantizeTile(w, out.data, nb * kFp8Block, std::min(n, (nb + 1) * kFp8Block),
                                         kb * kFp8Block, std::min(k, (kb + 1) * kFp8Block));
    }
  return Status::Ok();
}

Status QuantizeFp8Activation(const TensorView& x, const Fp8GroupActivation& out, Stream) {
  constexpr const char* kOp = "cpu::QuantizeFp8Activation";
  RETURN_IF_ERROR(CheckFp8Activation(kOp, out));
  const int64_t mp = out.data.dim(0), k = out.data.dim(1), m = x.dim(0);
  if (x.ndim() != 2 || Fp8PaddedRows(m) != mp)
    return InvalidArgumentError("{}: x {} does not fill fp8 rows [{}] (needs {} < M <= {})", kOp,
                                x.ToString(), mp, mp - 4, mp);
  RETURN_IF_ERROR(internal::CheckFloatMatrix(kOp, "x", x, m, k));
  float* scale = out.scale.data_as<float>();
  for (int64_t kb = 0; kb < Fp8Blocks(k); ++kb) {
    for (int64_t r = 0; r < m; ++r)
      scale[kb * mp + r] =
          QuantizeTile(x, out.data, r, r + 1, kb * kFp8Block, std::min(k, (kb + 1) * kFp8Block));
    for (int64_t r = m; r < mp; ++r) scale[kb * mp + r] = 1.f;
  }
  std::fill(out.data.data_as<uint8_t>() + m * k, out.data.data_as<uint8_t>() + mp * k, 0);
  return Status::Ok();
}

Status DequantizeFp8Weight(const Fp8BlockWeight& w, const TensorView& out, Stream) {
  constexpr const char* kOp = "cpu::DequantizeFp8Weight";
  RETURN_IF_ERROR(CheckFp8Weight(kOp, w));
  RETURN_IF_ERROR(internal::CheckFloatMatrix(kOp, "out", out, w.rows(), w.cols()));
  const uint8_t* q = w.data.data_as<const uint8_t>();
  const float* scale = w.scale.data_as<const float>();
  const int64_t ld = w.scale.dim(1), k = w.cols();
  for (int64_t r = 0; r < w.rows(); ++r)
    for (int64_t c = 0; c < k; ++c)
      StoreFloat(out, r, c, E4m3ToFloat(q[r * k + c]) * scale[(r / kFp8Block) * ld + c / kFp8Block]);
  return Status::Ok();
}

Status DequantizeFp8Activation(const Fp8GroupActivation& a, const TensorView& out, Stream) {
  constexpr const char* kOp = "cpu::DequantizeFp8Activation";
  RETURN_IF_ERROR(CheckFp8Activation(kOp, a));
  const int64_t m = a.data.dim(0), k = a.data.dim(1), ld = m;
  RETURN_IF_ERROR(internal::CheckFloatMatrix(kOp, "out", out, m, k));
  const uint8_t* q = a.data.data_as<const uint8_t>();
  const float* scale = a.scale.data_as<const float>();
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < k; ++c)
      StoreFloat(out, r, c, E4m3ToFloat(q[r * k + c]) * scale[(c / kFp8Block) * ld + r]);
  return Status::Ok();
}

Status Fp8Gemm(GemmContext*, const Fp8GroupActivation& a, const Fp8BlockWeight& w,
               const TensorView& c, const GemmOptions& opt, Stream s) {
  constexpr const char* kOp = "cpu::Fp8Gemm";
  RETURN_IF_ERROR(CheckFp8Activation(kOp, a));
  RETURN_IF_ERROR(CheckFp8Weight(kOp, w));
  if (!opt.trans_b || opt.trans_a || !opt.bias.empty())
    return InvalidArgumentError("{}: only y = x W^T without bias (trans_b) is implemented", kOp);
  const int64_t m = a.data.dim(0), k = a.data.dim(1), n = w.rows();
  if (w.cols() != k)
    return InvalidArgumentError("{}: activation has K={} but the weight is {}", kOp, k,
                                w.data.ToString());
  RETURN_IF_ERROR(internal::CheckFloatMatrix(kOp, "c", c, m, n));
  const Shape ashape{m, k}, wshape{n, k};
  std::vector<float> xa(static_cast<size_t>(m * k)), xw(static_cast<size_t>(n * k));
  RETURN_IF_ERROR(cpu::DequantizeFp8Activation(a, TensorView(xa.data(), DType::kF32, ashape, Device::Cpu()), s));
  RETURN_IF_ERROR(cpu::DequantizeFp8Weight(w, TensorView(xw.data(), DType::kF32, wshape, Device::Cpu()), s));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int64_t p = 0; p < k; ++p) acc += double(xa[i * k + p]) * double(xw[j * k + p]);
      double v = opt.alpha * acc;
      if (opt.beta != 0.f) v += opt.beta * double(LoadFloat(c, i, j));
      StoreFloat(c, i, j, static_cast<float>(v));
    }
  return Status::Ok();
}

}  // namespace cpu

Status TransposeFp8Weight(const Fp8BlockWeight& w, const Fp8BlockWeight& wt, Stream s) {
  if (w.data.device().is_cpu()) return cpu::TransposeFp8Weight(w, wt, s);
  return cuda::TransposeFp8Weight(w, wt, s);
}
Status QuantizeFp8Weight(const TensorView& w, const Fp8BlockWeight& out, Stream s) {
  if (out.data.device().is_cpu()) return cpu::QuantizeFp8Weight(w, out, s);
  return cuda::QuantizeFp8Weight(w, out, s);
}
Status QuantizeFp8Activation(const TensorView& x, const Fp8GroupActivation& out, Stream s) {
  if (out.data.device().is_cpu()) return cpu::QuantizeFp8Activation(x, out, s);
  return cuda::QuantizeFp8Activation(x, out, s);
}
Status DequantizeFp8Weight(const Fp8BlockWeight& w, const TensorView& out, Stream s) {
  if (w.data.device().is_cpu()) return cpu::DequantizeFp8Weight(w, out, s);
  return cuda::DequantizeFp8Weight(w, out, s);
}
Status Fp8Gemm(GemmContext* ctx, const Fp8GroupActivation& a, const Fp8BlockWeight& w,
               const TensorView& c, const GemmOptions& opt, Stream s) {
  if (a.data.device().is_cpu()) return cpu::Fp8Gemm(ctx, a, w, c, opt, s);
  return cuda::Fp8Gemm(ctx, a, w, c, opt, s);
}

#ifndef TANDEM_HAVE_CUDA
namespace cuda {
namespace {
Status NoCuda(const char* op) {
  return UnavailableError("{}: CUDA tensors but tandem was built without CUDA", op);
}
}  // namespace
Status TransposeFp8Weight(const Fp8BlockWeight&, const Fp8BlockWeight&, Stream) { return NoCuda("TransposeFp8Weight"); }
Status QuantizeFp8Weight(const TensorView&, const Fp8BlockWeight&, Stream) { return NoCuda("QuantizeFp8Weight"); }
Status QuantizeFp8Activation(const TensorView&, const Fp8GroupActivation&, Stream) { return NoCuda("QuantizeFp8Activation"); }
Status DequantizeFp8Weight(const Fp8BlockWeight&, const TensorView&, Stream) { return NoCuda("DequantizeFp8Weight"); }
Status Fp8Gemm(GemmContext*, const Fp8GroupActivation&, const Fp8BlockWeight&, const TensorView&,
               const GemmOptions&, Stream) { return NoCuda("Fp8Gemm"); }
Status CheckFp8Device(int) { return NoCuda("CheckFp8Device"); }
}  // namespace cuda
#endif

}  // namespace tandem::kernels
