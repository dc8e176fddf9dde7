// CPU reference GEMM: packs op(A) to fp32 [M,K] and op(B) to fp32 [N,K] so every output is
// a contiguous dot product, then walks 4x4 output tiles with fp32 accumulators (K in order).
#include <algorithm>
#include <vector>

#include "kernels/gemm/gemm.h"

namespace tandem::kernels {

Status CheckGemmArgs(const char* op, const TensorView& a, const TensorView& b,
                     const TensorView& c, const GemmOptions& opt, int64_t* m, int64_t* n,
                     int64_t* k) {
  RETURN_IF_ERROR(ExpectDType(op, "a", a, DType::kBF16));
  RETURN_IF_ERROR(ExpectDType(op, "b", b, DType::kBF16));
  if (c.dtype() != DType::kBF16 && c.dtype() != DType::kF32)
    return InvalidArgumentError("{}: c: expected bf16 or f32, got {}", op, DTypeName(c.dtype()));
  for (const TensorView* t : {&a, &b, &c}) {
    if (t->ndim() != 2)
      return InvalidArgumentError("{}: expected 2-d views, got {}", op, t->ToString());
    if (t->stride(1) != 1 || t->stride(0) < t->dim(1))
      return InvalidArgumentError("{}: {} needs unit column stride and row stride >= cols", op,
                                  t->ToString());
  }
  RETURN_IF_ERROR(ExpectSameDevice(op, a, b));
  RETURN_IF_ERROR(ExpectSameDevice(op, a, c));
  *m = opt.trans_a ? a.dim(1) : a.dim(0);
  *k = opt.trans_a ? a.dim(0) : a.dim(1);
  int64_t kb = opt.trans_b ? b.dim(1) : b.dim(0);
  *n = opt.trans_b ? b.dim(0) : b.dim(1);
  if (kb != *k)
    return InvalidArgumentError("{}: inner dims differ: op(a) {}x{} vs op(b) {}x{} (a {}, b {}, "
                                "trans_a={}, trans_b={})",
                                op, *m, *k, kb, *n, a.ToString(), b.ToString(), opt.trans_a,
                                opt.trans_b);
  RETURN_IF_ERROR(ExpectShape(op, "c", c, Shape{*m, *n}));
  if (!opt.bias.empty()) {
    RETURN_IF_ERROR(ExpectDType(op, "bias", opt.bias, c.dtype()));
    RETURN_IF_ERROR(ExpectShape(op, "bias", opt.bias, Shape{*n}));
    RETURN_IF_ERROR(ExpectContiguous(op, "bias", opt.bias));
    RETURN_IF_ERROR(ExpectSameDevice(op, a, opt.bias));
  }
  return Status::Ok();
}

namespace cpu {
namespace {

// Packs a [rows, cols] bf16 view, optionally transposed, into a dense fp32 [out_rows, K].
std::vector<float> PackRows(const TensorView& t, bool transpose) {
  const bf16* p = t.data_as<const bf16>();
  int64_t rows = t.dim(0), cols = t.dim(1), ld = t.stride(0);
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float v = p[r * ld + c].f();
      if (transpose) out[c * rows + r] = v; else out[r * cols + c] = v;
    }
  return out;
}

}  // namespace

Status Gemm(GemmContext* ctx, const TensorView& a, const TensorView& b, const TensorView& c,
            const GemmOptions& opt, Stream s) {
  int64_t m, n, k;
  RETURN_IF_ERROR(CheckGemmArgs("cpu::Gemm", a, b, c, opt, &m, &n, &k));
  if (!a.device().is_cpu()) return InvalidArgumentError("cpu::Gemm: views must be on the CPU");
  std::vector<float> pa = PackRows(a, opt.trans_a);   // [M,K]
  std::vector<float> pb = PackRows(b, !opt.trans_b);  // [N,K]
  const int64_t ldc = c.stride(0);
  const bool out_bf16 = c.dtype() == DType::kBF16;
  auto load_c = [&](int64_t i, int64_t j) {
    return out_bf16 ? c.data_as<bf16>()[i * ldc + j].f() : c.data_as<float>()[i * ldc + j];
  };
  auto bias = [&](int64_t j) {
    if (opt.bias.empty()) return 0.f;
    return out_bf16 ? opt.bias.data_as<const bf16>()[j].f() : opt.bias.data_as<const float>()[j];
  };
  constexpr int64_t kT = 4;
  for (int64_t i0 = 0; i0 < m; i0 += kT) {
    for (int64_t j0 = 0; j0 < n; j0 += kT) {
      float acc[kT][kT] = {};
      int64_t ti = std::min(kT, m - i0), tj = std::min(kT, n - j0);
      for (int64_t p = 0; p < k; ++p)
        for (int64_t i = 0; i < ti; ++i) {
          float av = pa[(i0 + i) * k + p];
          for (int64_t j = 0; j < tj; ++j) acc[i][j] += av * pb[(j0 + j) * k + p];
        }
      for (int64_t i = 0; i < ti; ++i)
        for (int64_t j = 0; j < tj; ++j) {
          int64_t r = i0 + i, col = j0 + j;
          float v = opt.alpha * acc[i][j] + bias(col);
          if (opt.beta != 0.f) v += opt.beta * load_c(r, col);
          if (out_bf16) c.data_as<bf16>()[r * ldc + col] = bf16(v);
          else c.data_as<float>()[r * ldc + col] = v;
        }
    }
  }
  return Status::Ok();
}

void GemmF64(int64_t m, int64_t n, int64_t k, const double* a, bool trans_a, const double* b,
             bool trans_b, double* c, double alpha, double beta) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += (trans_a ? a[p * m + i] : a[i * k + p]) * (trans_b ? b[j * k + p] : b[p * n + j]);
      c[i * n + j] = alpha * acc + (beta != 0 ? beta * c[i * n + j] : 0.0);
    }
}

}  // namespace cpu
}  // namespace tandem::kernels
