// EmbeddingForward: its checks (bf16 table and output, i32 ids, [T, H] out), then the row
// gather of kernels/elementwise/row_gather.h, which moves the rows as raw bytes on either device.
#include "kernels/elementwise/embedding.h"

#include "kernels/elementwise/row_gather.h"

namespace tandem::kernels {
namespace internal {

Status CheckEmbedding(const TensorView& out, const TensorView& ids, const TensorView& weight) {
  constexpr const char* kOp = "EmbeddingForward";
  RETURN_IF_ERROR(ExpectDType(kOp, "ids", ids, DType::kI32));
  RETURN_IF_ERROR(ExpectDType(kOp, "weight", weight, DType::kBF16));
  RETURN_IF_ERROR(ExpectDType(kOp, "out", out, DType::kBF16));
  if (ids.ndim() != 1 || weight.ndim() != 2)
    return InvalidArgumentError("{}: expected ids [T] and weight [V, H], got {} and {}", kOp,
                                ids.ToString(), weight.ToString());
  RETURN_IF_ERROR(ExpectShape(kOp, "out", out, {ids.dim(0), weight.dim(1)}));
  for (const TensorView* t : {&out, &ids, &weight})
    RETURN_IF_ERROR(ExpectContiguous(kOp, "tensor", *t));
  RETURN_IF_ERROR(ExpectSameDevice(kOp, out, ids));
  return ExpectSameDevice(kOp, out, weight);
}

}  // namespace internal

namespace cpu {
Status EmbeddingForward(TensorView out, TensorView ids, TensorView weight, Stream s) {
  RETURN_IF_ERROR(internal::CheckEmbedding(out, ids, weight));
  return cpu::RowGather(out, ids, weight, s);
}
}  // namespace cpu

#ifdef TANDEM_HAVE_CUDA
namespace cuda {
Status EmbeddingForward(TensorView out, TensorView ids, TensorView weight, Stream s) {
  RETURN_IF_ERROR(internal::CheckEmbedding(out, ids, weight));
  return cuda::RowGather(out, ids, weight, s);
}
}  // namespace cuda
#endif

Status EmbeddingForward(TensorView out, TensorView ids, TensorView weight, Stream s) {
  RETURN_IF_ERROR(internal::CheckEmbedding(out, ids, weight));
  return RowGather(out, ids, weight, s);
}

}  // namespace tandem::kernels
