// CPU reference for kernels/elementwise/row_gather.h, checks, and the dispatcher.
#include <cstring>

#include "kernels/elementwise/row_gather.h"

namespace tandem::kernels {
namespace internal {

Status CheckRowGather(const TensorView& out, const TensorView& rows, const TensorView& table,
                      int64_t* row_bytes) {
  constexpr const char* kOp = "RowGather";
  RETURN_IF_ERROR(ExpectDType(kOp, "rows", rows, DType::kI32));
  RETURN_IF_ERROR(ExpectDType(kOp, "out", out, table.dtype()));
  if (rows.ndim() != 1 || table.ndim() < 1 || out.ndim() != table.ndim())
    return InvalidArgumentError("{}: expected rows [N], table [M, ...] and out [N, ...], got "
                                "{}, {} and {}", kOp, rows.ToString(), table.ToString(),
                                out.ToString());
  bool same_rows = out.dim(0) == rows.dim(0);
  for (int i = 1; i < table.ndim(); ++i) same_rows = same_rows && out.dim(i) == table.dim(i);
  if (!same_rows)
    return InvalidArgumentError("{}: out {} must be [{}] + table {}'s row shape", kOp,
                                out.ToString(), rows.dim(0), table.ToString());
  for (const TensorView* t : {&out, &rows, &table})
    RETURN_IF_ERROR(ExpectContiguous(kOp, "tensor", *t));
  RETURN_IF_ERROR(ExpectSameDevice(kOp, out, rows));
  RETURN_IF_ERROR(ExpectSameDevice(kOp, out, table));
  int64_t elems = 1;
  for (int i = 1; i < table.ndim(); ++i) elems *= table.dim(i);
  *row_bytes = elems * DTypeSize(table.dtype());
  return Status::Ok();
}

}  // namespace internal

namespace cpu {

Status RowGather(TensorView out, TensorView rows, TensorView table, Stream) {
  int64_t row_bytes = 0;
  RETURN_IF_ERROR(internal::CheckRowGather(out, rows, table, &row_bytes));
  const int64_t m = table.dim(0);
  const int32_t* idx = rows.data_as<const int32_t>();
  char* o = static_cast<char*>(out.data());
  const char* src = static_cast<const char*>(table.data());
  for (int64_t n = 0; n < rows.dim(0); ++n, o += row_bytes) {
    const int64_t r = idx[n];
    if (r < 0 || r >= m) {
      std::memset(o, 0, row_bytes);
    } else {
      std::memcpy(o, src + r * row_bytes, row_bytes);
    }
  }
  return Status::Ok();
}

}  // namespace cpu

Status RowGather(TensorView out, TensorView rows, TensorView table, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d, DispatchDevice("RowGather", {out, rows, table}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda()) return cuda::RowGather(out, rows, table, s);
#endif
  return cpu::RowGather(out, rows, table, s);
}

}  // namespace tandem::kernels
