// CPU version of kernels/dflash2/dynamic_conv.h: widens the bf16 views to float, runs the
// float reference of grouped_dynamic_conv.h, rounds once to bf16. Also the argument checks
// shared with the CUDA version, the workspace size and the dispatchers.
#include <algorithm>
#include <vector>

#include "kernels/dflash2/dynamic_conv.h"
#include "kernels/dflash2/grouped_dynamic_conv.h"

namespace tandem::kernels::dflash2 {
namespace {

// Rows per thread block of the CUDA backward (one partial dbase row set per block); kept in
// step with dynamic_conv.cu (kRowsPerBlock there).
constexpr int64_t kBackwardRowsPerBlock = 64;

// A [rows, cols] bf16 view with a contiguous last dim and row stride >= cols.
Status CheckRows(const char* op, const char* what, const TensorView& t, int64_t rows,
                 int64_t cols) {
  RETURN_IF_ERROR(ExpectDType(op, what, t, DType::kBF16));
  if (t.ndim() != 2 || t.dim(0) != rows || t.dim(1) != cols)
    return InvalidArgumentError("{}: {}: expected bf16 [{}, {}], got {}", op, what, rows, cols,
                                t.ToString());
  if (cols > 0 && (t.stride(1) != 1 || (rows > 1 && t.stride(0) < cols)))
    return InvalidArgumentError(
        "{}: {}: the last dim must be contiguous and rows must not "
        "overlap, got {} with strides [{}, {}]",
        op, what, t.ToString(), t.stride(0), t.stride(1));
  return Status::Ok();
}

// Byte range [first, last) a 2-d view touches.
std::pair<uintptr_t, uintptr_t> Span(const TensorView& t) {
  const auto p = reinterpret_cast<uintptr_t>(t.data());
  if (t.numel() == 0) return {p, p};
  const int64_t last = (t.dim(0) - 1) * t.stride(0) + (t.dim(1) - 1) * t.stride(1);
  return {p, p + (last + 1) * DTypeSize(t.dtype())};
}

Status ExpectNoOverlap(const char* op, const char* a_name, const TensorView& a, const char* b_name,
                       const TensorView& b) {
  auto [a0, a1] = Span(a);
  auto [b0, b1] = Span(b);
  if (a0 < b1 && b0 < a1)
    return InvalidArgumentError("{}: {} {} must not overlap {} {}", op, a_name, a.ToString(),
                                b_name, b.ToString());
  return Status::Ok();
}

Status CheckCommon(const char* op, const TensorView& x, const TensorView& base, const TensorView& d,
                   int64_t group, int64_t block_size, internal::DynamicConvDims* dims) {
  if (x.ndim() != 2 || base.ndim() != 2)
    return InvalidArgumentError("{}: x {} and base {} must be 2-d", op, x.ToString(),
                                base.ToString());
  const int64_t rows = x.dim(0), h = x.dim(1), taps = base.dim(0);
  if (h < 1 || taps < 1)
    return InvalidArgumentError("{}: need H >= 1 and K >= 1, got x {} and base {}", op,
                                x.ToString(), base.ToString());
  if (group < 1 || h % group != 0)
    return InvalidArgumentError("{}: group {} must be >= 1 and divide H = {}", op, group, h);
  if (block_size < 1)
    return InvalidArgumentError("{}: block_size must be >= 1, got {}", op, block_size);
  RETURN_IF_ERROR(CheckRows(op, "x", x, rows, h));
  RETURN_IF_ERROR(ExpectDType(op, "base", base, DType::kBF16));
  RETURN_IF_ERROR(ExpectShape(op, "base", base, Shape{taps, h}));
  RETURN_IF_ERROR(ExpectContiguous(op, "base", base));
  RETURN_IF_ERROR(CheckRows(op, "d", d, rows, taps * (h / group)));
  for (const TensorView* t : {&base, &d}) RETURN_IF_ERROR(ExpectSameDevice(op, x, *t));
  *dims = {rows, h, taps, h / group};
  return Status::Ok();
}

std::vector<int32_t> Positions(int64_t rows, int64_t block_size) {
  std::vector<int32_t> pos(static_cast<size_t>(rows));
  for (int64_t t = 0; t < rows; ++t) pos[t] = static_cast<int32_t>(t % block_size);
  return pos;
}

std::vector<float> Widen(const TensorView& t) {
  const int64_t rows = t.dim(0), cols = t.dim(1);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      v[r * cols + c] = t.data_as<const bf16>()[r * t.stride(0) + c].f();
  return v;
}

}  // namespace

int64_t DynamicConvBackwardWorkspaceBytes(int64_t rows, int64_t hidden, int64_t taps) {
  const int64_t tiles = (rows + kBackwardRowsPerBlock - 1) / kBackwardRowsPerBlock;
  return tiles * taps * hidden * static_cast<int64_t>(sizeof(float));
}

namespace internal {

Status CheckDynamicConvForward(const TensorView& y, const TensorView& x, const TensorView& base,
                               const TensorView& d, int64_t group, int64_t block_size,
                               DynamicConvDims* dims) {
  constexpr const char* kOp = "DynamicConvForward";
  RETURN_IF_ERROR(CheckCommon(kOp, x, base, d, group, block_size, dims));
  RETURN_IF_ERROR(CheckRows(kOp, "y", y, dims->rows, dims->hidden));
  RETURN_IF_ERROR(ExpectSameDevice(kOp, x, y));
  return ExpectNoOverlap(kOp, "y", y, "x", x);
}

Status CheckDynamicConvBackward(const TensorView& dx, const TensorView& dbase, const TensorView& dd,
                                const TensorView& dy, const TensorView& x, const TensorView& base,
                                const TensorView& d, int64_t group, int64_t block_size,
                                DynamicConvDims* dims) {
  constexpr const char* kOp = "DynamicConvBackward";
  RETURN_IF_ERROR(CheckCommon(kOp, x, base, d, group, block_size, dims));
  RETURN_IF_ERROR(CheckRows(kOp, "dy", dy, dims->rows, dims->hidden));
  RETURN_IF_ERROR(CheckRows(kOp, "dx", dx, dims->rows, dims->hidden));
  RETURN_IF_ERROR(CheckRows(kOp, "dd", dd, dims->rows, dims->taps * dims->groups));
  RETURN_IF_ERROR(ExpectDType(kOp, "dbase", dbase, DType::kF32));
  RETURN_IF_ERROR(ExpectShape(kOp, "dbase", dbase, Shape{dims->taps, dims->hidden}));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "dbase", dbase));
  for (const TensorView* t : {&dy, &dx, &dd, &dbase}) RETURN_IF_ERROR(ExpectSameDevice(kOp, x, *t));
  RETURN_IF_ERROR(ExpectNoOverlap(kOp, "dx", dx, "dy", dy));
  RETURN_IF_ERROR(ExpectNoOverlap(kOp, "dx", dx, "x", x));
  RETURN_IF_ERROR(ExpectNoOverlap(kOp, "dx", dx, "d", d));
  RETURN_IF_ERROR(ExpectNoOverlap(kOp, "dx", dx, "dd", dd));
  return ExpectNoOverlap(kOp, "dd", dd, "d", d);
}

}  // namespace internal

namespace cpu {

Status DynamicConvForward(const TensorView& y, const TensorView& x, const TensorView& base,
                          const TensorView& d, int64_t group, int64_t block_size, bool accumulate,
                          Stream) {
  internal::DynamicConvDims n;
  RETURN_IF_ERROR(internal::CheckDynamicConvForward(y, x, base, d, group, block_size, &n));
  if (!x.device().is_cpu())
    return InvalidArgumentError("cpu::DynamicConvForward: views must be on the CPU");
  if (n.rows == 0) return Status::Ok();
  const ConvShape shape{.rows = n.rows, .hidden = n.hidden, .taps = n.taps, .group = group};
  const std::vector<float> xf = Widen(x), bf = Widen(base), df = Widen(d);
  const std::vector<int32_t> pos = Positions(n.rows, block_size);
  std::vector<float> yf(xf.size());
  GroupedDynamicConvForward<float>(shape, xf.data(), bf.data(), df.data(), n.taps * n.groups,
                                   pos.data(), yf.data());
  for (int64_t t = 0; t < n.rows; ++t) {
    bf16* yt = y.data_as<bf16>() + t * y.stride(0);
    for (int64_t c = 0; c < n.hidden; ++c) {
      const float conv = yf[t * n.hidden + c];
      yt[c] = bf16(accumulate ? yt[c].f() + conv : conv);
    }
  }
  return Status::Ok();
}

Status DynamicConvBackward(const TensorView& dx, const TensorView& dbase, const TensorView& dd,
                           const TensorView& dy, const TensorView& x, const TensorView& base,
                           const TensorView& d, int64_t group, int64_t block_size,
                           const TensorView&, Stream) {
  internal::DynamicConvDims n;
  RETURN_IF_ERROR(
      internal::CheckDynamicConvBackward(dx, dbase, dd, dy, x, base, d, group, block_size, &n));
  if (!x.device().is_cpu())
    return InvalidArgumentError("cpu::DynamicConvBackward: views must be on the CPU");
  if (n.rows == 0) return Status::Ok();
  const ConvShape shape{.rows = n.rows, .hidden = n.hidden, .taps = n.taps, .group = group};
  const int64_t ld = n.taps * n.groups;
  const std::vector<float> xf = Widen(x), bf = Widen(base), df = Widen(d), dyf = Widen(dy);
  const std::vector<int32_t> pos = Positions(n.rows, block_size);
  std::vector<float> dxf(xf.size(), 0.f), dbf(bf.size(), 0.f), ddf(df.size(), 0.f);
  GroupedDynamicConvBackward<float>(shape, xf.data(), bf.data(), df.data(), ld, pos.data(),
                                    dyf.data(), dxf.data(), dbf.data(), ddf.data());
  for (int64_t t = 0; t < n.rows; ++t) {
    bf16* dxt = dx.data_as<bf16>() + t * dx.stride(0);
    for (int64_t c = 0; c < n.hidden; ++c) dxt[c] = bf16(dxf[t * n.hidden + c]);
    bf16* ddt = dd.data_as<bf16>() + t * dd.stride(0);
    for (int64_t j = 0; j < ld; ++j) ddt[j] = bf16(ddf[t * ld + j]);
  }
  float* db = dbase.data_as<float>();
  for (size_t i = 0; i < dbf.size(); ++i) db[i] += dbf[i];
  return Status::Ok();
}

}  // namespace cpu

Status DynamicConvForward(const TensorView& y, const TensorView& x, const TensorView& base,
                          const TensorView& d, int64_t group, int64_t block_size, bool accumulate,
                          Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device dev,
                   DispatchDevice("DynamicConvForward", {y, x, base, d}));
#ifdef TANDEM_HAVE_CUDA
  if (dev.is_cuda())
    return cuda::DynamicConvForward(y, x, base, d, group, block_size, accumulate, s);
#endif
  return cpu::DynamicConvForward(y, x, base, d, group, block_size, accumulate, s);
}

Status DynamicConvBackward(const TensorView& dx, const TensorView& dbase, const TensorView& dd,
                           const TensorView& dy, const TensorView& x, const TensorView& base,
                           const TensorView& d, int64_t group, int64_t block_size,
                           const TensorView& workspace, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device dev,
                   DispatchDevice("DynamicConvBackward", {dx, dbase, dd, dy, x, base, d}));
#ifdef TANDEM_HAVE_CUDA
  if (dev.is_cuda())
    return cuda::DynamicConvBackward(dx, dbase, dd, dy, x, base, d, group, block_size, workspace,
                                     s);
#endif
  return cpu::DynamicConvBackward(dx, dbase, dd, dy, x, base, d, group, block_size, workspace, s);
}

}  // namespace tandem::kernels::dflash2
