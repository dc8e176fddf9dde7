// The row-wise FP8 expert path's kernels (kernels/moe/experts_fp8.h) on the CPU: the
// reference twin of the CUDA kernels (experts_fp8.cu), with the same float math in the same
// order, and the argument checks both versions share. Thread-safety: stateless.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/gemm/fp8_format.h"
#include "kernels/moe/experts_fp8.h"

namespace tandem::kernels {
namespace {

// Expert and data-row flag of buffer row r (see MoeFp8Rows); offsets host i32 [E + 1].
struct RowOwner {
  int64_t expert;
  bool data;
};
RowOwner OwnerOf(const int32_t* o, int64_t e_count, int64_t cap, int64_t r) {
  if (cap > 0) {
    const int64_t e = r / cap;
    return {e, r % cap < o[e + 1] - o[e]};
  }
  const int64_t e = std::upper_bound(o, o + e_count + 1, static_cast<int32_t>(r)) - o - 1;
  return {std::min(e, e_count - 1), true};
}

float RowScale(float amax) { return amax > 0.f ? amax / kE4m3Max : 1.f; }

// Quantizes v[0..k) into dst with one scale (returned).
float QuantizeRow(const float* v, int64_t k, uint8_t* dst) {
  float amax = 0.f;
  for (int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(v[c]));
  const float scale = RowScale(amax);
  for (int64_t c = 0; c < k; ++c) dst[c] = FloatToE4m3(v[c] / scale);
  return scale;
}

// The offsets' expert count and the processed rows' bound, checked against the layout.
Status CheckRows(const char* op, const MoeFp8Rows& rows, bool need_offsets, int64_t e_count) {
  if (rows.rows < 0 || rows.cap < 0)
    return InvalidArgumentError("{}: rows {} and cap {} must be >= 0", op, rows.rows, rows.cap);
  if (!need_offsets && rows.cap == 0 && rows.offsets.empty()) return Status::Ok();
  RETURN_IF_ERROR(ExpectDType(op, "offsets", rows.offsets, DType::kI32));
  if (rows.offsets.numel() < 2 || (e_count >= 0 && rows.offsets.numel() != e_count + 1))
    return InvalidArgumentError("{}: offsets {} must hold E + 1 values (E = {})", op,
                                rows.offsets.ToString(), e_count);
  if (rows.cap > 0 && rows.rows > (rows.offsets.numel() - 1) * rows.cap)
    return InvalidArgumentError("{}: {} rows exceed E cap = {} x {}", op, rows.rows,
                                rows.offsets.numel() - 1, rows.cap);
  return Status::Ok();
}

// t: `dtype`, 2-D, >= rows rows of `cols` columns, unit column stride (dense rows: stride cols).
Status CheckMatrix(const char* op, const char* what, const TensorView& t, DType dtype,
                   int64_t rows, int64_t cols, bool dense) {
  RETURN_IF_ERROR(ExpectDType(op, what, t, dtype));
  if (t.ndim() != 2 || t.dim(0) < rows || t.dim(1) != cols || t.stride(1) != 1 ||
      (dense && t.stride(0) != cols))
    return InvalidArgumentError("{}: {} {} must be [>= {}, {}]{}", op, what, t.ToString(), rows,
                                cols, dense ? " with dense rows" : "");
  return Status::Ok();
}

Status CheckVector(const char* op, const char* what, const TensorView& t, int64_t n) {
  RETURN_IF_ERROR(ExpectDType(op, what, t, DType::kF32));
  if (t.numel() < n || !t.is_contiguous())
    return InvalidArgumentError("{}: {} {} needs >= {} contiguous values", op, what,
                                t.ToString(), n);
  return Status::Ok();
}

}  // namespace

namespace internal {

Status CheckMoeFp8QuantizeRows(const char* op, const TensorView& x, const TensorView& gather,
                               const MoeFp8Rows& rows, const TensorView& codes,
                               const TensorView& scale) {
  RETURN_IF_ERROR(CheckRows(op, rows, rows.cap > 0, -1));
  const int64_t k = codes.ndim() == 2 ? codes.dim(1) : -1;
  RETURN_IF_ERROR(CheckMatrix(op, "codes", codes, DType::kF8E4M3, rows.rows, k, true));
  RETURN_IF_ERROR(CheckMatrix(op, "x", x, DType::kBF16, gather.empty() ? rows.rows : 0, k,
                              false));
  RETURN_IF_ERROR(CheckVector(op, "scale", scale, rows.rows));
  if (!gather.empty()) {
    RETURN_IF_ERROR(ExpectDType(op, "gather", gather, DType::kI32));
    if (gather.numel() < rows.rows)
      return InvalidArgumentError("{}: gather {} has fewer than {} rows", op, gather.ToString(),
                                  rows.rows);
    RETURN_IF_ERROR(ExpectSameDevice(op, x, gather));
  }
  if (!rows.offsets.empty()) RETURN_IF_ERROR(ExpectSameDevice(op, x, rows.offsets));
  RETURN_IF_ERROR(ExpectSameDevice(op, x, codes));
  return ExpectSameDevice(op, x, scale);
}

Status CheckMoeFp8GatherRows(const char* op, const TensorView& src,
                             const TensorView& src_scale, const TensorView& gather,
                             const MoeFp8Rows& rows, const TensorView& codes,
                             const TensorView& scale) {
  RETURN_IF_ERROR(CheckRows(op, rows, rows.cap > 0, -1));
  const int64_t k = codes.ndim() == 2 ? codes.dim(1) : -1;
  RETURN_IF_ERROR(CheckMatrix(op, "codes", codes, DType::kF8E4M3, rows.rows, k, true));
  RETURN_IF_ERROR(CheckMatrix(op, "src", src, DType::kF8E4M3, 0, k, true));
  RETURN_IF_ERROR(CheckVector(op, "src_scale", src_scale, src.dim(0)));
  RETURN_IF_ERROR(CheckVector(op, "scale", scale, rows.rows));
  RETURN_IF_ERROR(ExpectDType(op, "gather", gather, DType::kI32));
  if (gather.numel() < rows.rows)
    return InvalidArgumentError("{}: gather {} has fewer than {} rows", op, gather.ToString(),
                                rows.rows);
  for (const TensorView* v : {&src_scale, &gather, &codes, &scale})
    RETURN_IF_ERROR(ExpectSameDevice(op, src, *v));
  if (!rows.offsets.empty()) RETURN_IF_ERROR(ExpectSameDevice(op, src, rows.offsets));
  return Status::Ok();
}

Status CheckMoeFp8SwiGlu(const char* op, const TensorView& raw, const TensorView& x_scale,
                         const TensorView& w_scale, const MoeFp8Rows& rows,
                         const TensorView& codes, const TensorView& act_scale) {
  const int64_t e = w_scale.ndim() == 2 ? w_scale.dim(0) : -1;
  const int64_t i2 = w_scale.ndim() == 2 ? w_scale.dim(1) : -1;
  if (e < 1 || i2 % 2 != 0 || !w_scale.is_contiguous())
    return InvalidArgumentError("{}: w_scale {} must be a contiguous [E, 2I]", op,
                                w_scale.ToString());
  RETURN_IF_ERROR(CheckRows(op, rows, true, e));
  RETURN_IF_ERROR(ExpectDType(op, "w_scale", w_scale, DType::kF32));
  RETURN_IF_ERROR(CheckMatrix(op, "raw gate_up", raw, DType::kBF16, rows.rows, i2, false));
  RETURN_IF_ERROR(CheckMatrix(op, "act codes", codes, DType::kF8E4M3, rows.rows, i2 / 2, true));
  RETURN_IF_ERROR(CheckVector(op, "x_scale", x_scale, rows.rows));
  RETURN_IF_ERROR(CheckVector(op, "act_scale", act_scale, rows.rows));
  for (const TensorView* v : {&x_scale, &w_scale, &rows.offsets, &codes, &act_scale})
    RETURN_IF_ERROR(ExpectSameDevice(op, raw, *v));
  return Status::Ok();
}

Status CheckMoeFp8ScaleRows(const char* op, const TensorView& y, const TensorView& act_scale,
                            const TensorView& w_scale, const MoeFp8Rows& rows) {
  const int64_t e = w_scale.ndim() == 2 ? w_scale.dim(0) : -1;
  if (e < 1 || !w_scale.is_contiguous())
    return InvalidArgumentError("{}: w_scale {} must be a contiguous [E, H]", op,
                                w_scale.ToString());
  RETURN_IF_ERROR(CheckRows(op, rows, true, e));
  RETURN_IF_ERROR(ExpectDType(op, "w_scale", w_scale, DType::kF32));
  RETURN_IF_ERROR(CheckMatrix(op, "y", y, DType::kBF16, rows.rows, w_scale.dim(1), false));
  RETURN_IF_ERROR(CheckVector(op, "act_scale", act_scale, rows.rows));
  for (const TensorView* v : {&act_scale, &w_scale, &rows.offsets})
    RETURN_IF_ERROR(ExpectSameDevice(op, y, *v));
  return Status::Ok();
}

}  // namespace internal

namespace cpu {

namespace {

// Runs fill(r, codes row r) for each of rows.rows rows that holds data, and writes a padding
// row (past its expert's count on the padded layout) as zero codes with scale 1.
template <typename Fill>
Status ForEachRow(const MoeFp8Rows& rows, const TensorView& codes, const TensorView& scale,
                  Fill&& fill) {
  const int64_t k = codes.dim(1);
  const int32_t* o = rows.offsets.empty() ? nullptr : rows.offsets.data_as<const int32_t>();
  const int64_t e_count = rows.offsets.numel() - 1;
  for (int64_t r = 0; r < rows.rows; ++r) {
    uint8_t* dst = codes.data_as<uint8_t>() + r * k;
    if (rows.cap > 0 && !OwnerOf(o, e_count, rows.cap, r).data) {
      std::fill(dst, dst + k, uint8_t{0});
      scale.data_as<float>()[r] = 1.f;
      continue;
    }
    RETURN_IF_ERROR(fill(r, dst));
  }
  return Status::Ok();
}

}  // namespace

Status MoeFp8QuantizeRows(const TensorView& x, const TensorView& gather, const MoeFp8Rows& rows,
                          const TensorView& codes, const TensorView& scale, Stream) {
  constexpr const char* kOp = "cpu::MoeFp8QuantizeRows";
  RETURN_IF_ERROR(internal::CheckMoeFp8QuantizeRows(kOp, x, gather, rows, codes, scale));
  const int64_t k = codes.dim(1);
  std::vector<float> v(static_cast<size_t>(k));
  return ForEachRow(rows, codes, scale, [&](int64_t r, uint8_t* dst) -> Status {
    const int64_t src = gather.empty() ? r : gather.data_as<const int32_t>()[r];
    if (src < 0 || src >= x.dim(0))
      return InvalidArgumentError("{}: gather[{}] = {} is outside x's {} rows", kOp, r, src,
                                  x.dim(0));
    const bf16* row = x.data_as<const bf16>() + src * x.stride(0);
    for (int64_t c = 0; c < k; ++c) v[c] = row[c].f();
    scale.data_as<float>()[r] = QuantizeRow(v.data(), k, dst);
    return Status::Ok();
  });
}

Status MoeFp8GatherRows(const TensorView& src, const TensorView& src_scale,
                        const TensorView& gather, const MoeFp8Rows& rows, const TensorView& codes,
                        const TensorView& scale, Stream) {
  constexpr const char* kOp = "cpu::MoeFp8GatherRows";
  RETURN_IF_ERROR(
      internal::CheckMoeFp8GatherRows(kOp, src, src_scale, gather, rows, codes, scale));
  const int64_t k = codes.dim(1);
  return ForEachRow(rows, codes, scale, [&](int64_t r, uint8_t* dst) -> Status {
    const int64_t from = gather.data_as<const int32_t>()[r];
    if (from < 0 || from >= src.dim(0))
      return InvalidArgumentError("{}: gather[{}] = {} is outside src's {} rows", kOp, r, from,
                                  src.dim(0));
    const uint8_t* row = src.data_as<const uint8_t>() + from * k;
    std::copy(row, row + k, dst);
    scale.data_as<float>()[r] = src_scale.data_as<const float>()[from];
    return Status::Ok();
  });
}

Status MoeFp8SwiGluQuantize(const TensorView& raw, const TensorView& x_scale,
                            const TensorView& w_scale, const MoeFp8Rows& rows,
                            const TensorView& codes, const TensorView& act_scale, Stream) {
  constexpr const char* kOp = "cpu::MoeFp8SwiGluQuantize";
  RETURN_IF_ERROR(
      internal::CheckMoeFp8SwiGlu(kOp, raw, x_scale, w_scale, rows, codes, act_scale));
  const int64_t e_count = w_scale.dim(0), i = w_scale.dim(1) / 2;
  const int32_t* o = rows.offsets.data_as<const int32_t>();
  std::vector<float> act(static_cast<size_t>(i));
  for (int64_t r = 0; r < rows.rows; ++r) {
    uint8_t* dst = codes.data_as<uint8_t>() + r * i;
    const RowOwner own = OwnerOf(o, e_count, rows.cap, r);
    if (!own.data) {
      std::fill(dst, dst + i, uint8_t{0});
      act_scale.data_as<float>()[r] = 1.f;
      continue;
    }
    const bf16* in = raw.data_as<const bf16>() + r * raw.stride(0);
    const float* sw = w_scale.data_as<const float>() + own.expert * 2 * i;
    const float sx = x_scale.data_as<const float>()[r];
    for (int64_t c = 0; c < i; ++c) {
      const float g = in[c].f() * sx * sw[c];
      const float u = in[i + c].f() * sx * sw[i + c];
      act[c] = g / (1.f + std::exp(-g)) * u;
    }
    act_scale.data_as<float>()[r] = QuantizeRow(act.data(), i, dst);
  }
  return Status::Ok();
}

Status MoeFp8ScaleRows(const TensorView& y, const TensorView& act_scale,
                       const TensorView& w_scale, const MoeFp8Rows& rows, Stream) {
  constexpr const char* kOp = "cpu::MoeFp8ScaleRows";
  RETURN_IF_ERROR(internal::CheckMoeFp8ScaleRows(kOp, y, act_scale, w_scale, rows));
  const int64_t e_count = w_scale.dim(0), h = w_scale.dim(1);
  const int32_t* o = rows.offsets.data_as<const int32_t>();
  for (int64_t r = 0; r < rows.rows; ++r) {
    const RowOwner own = OwnerOf(o, e_count, rows.cap, r);
    if (!own.data) continue;
    bf16* out = y.data_as<bf16>() + r * y.stride(0);
    const float* sw = w_scale.data_as<const float>() + own.expert * h;
    const float sa = act_scale.data_as<const float>()[r];
    for (int64_t c = 0; c < h; ++c) out[c] = bf16(out[c].f() * sa * sw[c]);
  }
  return Status::Ok();
}

}  // namespace cpu

#ifndef TANDEM_HAVE_CUDA
namespace cuda {
namespace {
Status NoCuda(const char* op) {
  return UnavailableError("{}: CUDA tensors but tandem was built without CUDA", op);
}
}  // namespace
Status MoeFp8QuantizeRows(const TensorView&, const TensorView&, const MoeFp8Rows&,
                          const TensorView&, const TensorView&, Stream) {
  return NoCuda("MoeFp8QuantizeRows");
}
Status MoeFp8GatherRows(const TensorView&, const TensorView&, const TensorView&,
                        const MoeFp8Rows&, const TensorView&, const TensorView&, Stream) {
  return NoCuda("MoeFp8GatherRows");
}
Status MoeFp8SwiGluQuantize(const TensorView&, const TensorView&, const TensorView&,
                            const MoeFp8Rows&, const TensorView&, const TensorView&, Stream) {
  return NoCuda("MoeFp8SwiGluQuantize");
}
Status MoeFp8ScaleRows(const TensorView&, const TensorView&, const TensorView&,
                       const MoeFp8Rows&, Stream) {
  return NoCuda("MoeFp8ScaleRows");
}
}  // namespace cuda
#endif

}  // namespace tandem::kernels
