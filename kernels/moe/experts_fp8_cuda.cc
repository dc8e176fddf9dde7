// cuda:: versions of the row-wise FP8 expert kernels (kernels/moe/experts_fp8.h): checks (the
// CPU twin's, plus the eight-column vectors the kernels take), NVTX range, launch
// (experts_fp8.cu). Thread-safety: stateless, ordered on `s`.
#include <cstdint>
#include <initializer_list>

#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"
#include "kernels/moe/experts_fp8.h"
#include "kernels/moe/moe_kernels.h"

namespace tandem::kernels {
namespace cuda {
namespace {

// The kernels load and store eight columns at a time: `cols` and every row stride multiples
// of 8, the bases 16-byte aligned.
Status CheckVectors(const char* op, int64_t cols, std::initializer_list<const TensorView*> views) {
  if (cols % 8 != 0)
    return InvalidArgumentError("{}: {} columns; the CUDA kernels need a multiple of 8", op,
                                cols);
  for (const TensorView* v : views)
    if (reinterpret_cast<uintptr_t>(v->data()) % 16 != 0 || (v->ndim() == 2 && v->stride(0) % 8))
      return InvalidArgumentError("{}: {} needs 16-byte aligned rows", op, v->ToString());
  return Status::Ok();
}

const int32_t* OffsetsOf(const MoeFp8Rows& rows) {
  return rows.offsets.empty() ? nullptr : rows.offsets.data_as<const int32_t>();
}
int64_t ExpertsOf(const MoeFp8Rows& rows) {
  return rows.offsets.empty() ? 0 : rows.offsets.numel() - 1;
}

}  // namespace

Status MoeFp8QuantizeRows(const TensorView& x, const TensorView& gather, const MoeFp8Rows& rows,
                          const TensorView& codes, const TensorView& scale, Stream s) {
  constexpr const char* kOp = "cuda::MoeFp8QuantizeRows";
  RETURN_IF_ERROR(internal::CheckMoeFp8QuantizeRows(kOp, x, gather, rows, codes, scale));
  RETURN_IF_ERROR(CheckVectors(kOp, codes.dim(1), {&x, &codes}));
  if (rows.rows == 0) return Status::Ok();
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(LaunchMoeFp8QuantizeRows(
      x.data(), x.stride(0), gather.empty() ? nullptr : gather.data_as<const int32_t>(),
      OffsetsOf(rows), ExpertsOf(rows), rows.cap, rows.rows, codes.dim(1),
      codes.data_as<uint8_t>(), scale.data_as<float>(), s));
  return Status::Ok();
}

Status MoeFp8GatherRows(const TensorView& src, const TensorView& src_scale,
                        const TensorView& gather, const MoeFp8Rows& rows, const TensorView& codes,
                        const TensorView& scale, Stream s) {
  constexpr const char* kOp = "cuda::MoeFp8GatherRows";
  RETURN_IF_ERROR(
      internal::CheckMoeFp8GatherRows(kOp, src, src_scale, gather, rows, codes, scale));
  const int64_t k = codes.dim(1);
  if (k % 16 != 0)
    return InvalidArgumentError("{}: {} columns; the CUDA kernel copies 16 bytes at a time",
                                kOp, k);
  RETURN_IF_ERROR(CheckVectors(kOp, k, {&src, &codes}));
  if (rows.rows == 0) return Status::Ok();
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(LaunchMoeFp8GatherRows(
      src.data_as<const uint8_t>(), src_scale.data_as<const float>(),
      gather.data_as<const int32_t>(), OffsetsOf(rows), ExpertsOf(rows), rows.cap, rows.rows, k,
      codes.data_as<uint8_t>(), scale.data_as<float>(), s));
  return Status::Ok();
}

Status MoeFp8SwiGluQuantize(const TensorView& raw, const TensorView& x_scale,
                            const TensorView& w_scale, const MoeFp8Rows& rows,
                            const TensorView& codes, const TensorView& act_scale, Stream s) {
  constexpr const char* kOp = "cuda::MoeFp8SwiGluQuantize";
  RETURN_IF_ERROR(
      internal::CheckMoeFp8SwiGlu(kOp, raw, x_scale, w_scale, rows, codes, act_scale));
  const int64_t i = codes.dim(1);
  RETURN_IF_ERROR(CheckVectors(kOp, i, {&raw, &codes, &w_scale}));
  if (rows.rows == 0) return Status::Ok();
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(LaunchMoeFp8SwiGluQuantize(
      raw.data(), raw.stride(0), x_scale.data_as<const float>(), w_scale.data_as<const float>(),
      OffsetsOf(rows), ExpertsOf(rows), rows.cap, rows.rows, i, codes.data_as<uint8_t>(),
      act_scale.data_as<float>(), s));
  return Status::Ok();
}

Status MoeFp8ScaleRows(const TensorView& y, const TensorView& act_scale,
                       const TensorView& w_scale, const MoeFp8Rows& rows, Stream s) {
  constexpr const char* kOp = "cuda::MoeFp8ScaleRows";
  RETURN_IF_ERROR(internal::CheckMoeFp8ScaleRows(kOp, y, act_scale, w_scale, rows));
  RETURN_IF_ERROR(CheckVectors(kOp, y.dim(1), {&y}));
  if (rows.rows == 0) return Status::Ok();
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(LaunchMoeFp8ScaleRows(
      y.data(), y.stride(0), act_scale.data_as<const float>(), w_scale.data_as<const float>(),
      OffsetsOf(rows), ExpertsOf(rows), rows.cap, rows.rows, y.dim(1), s));
  return Status::Ok();
}

}  // namespace cuda
}  // namespace tandem::kernels
