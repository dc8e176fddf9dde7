// CPU reference for kernels/embedding.h, checks, and the dispatcher.
#include <algorithm>
#include <cstring>

#include "kernels/embedding.h"

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

Status EmbeddingForward(TensorView out, TensorView ids, TensorView weight, Stream) {
  RETURN_IF_ERROR(internal::CheckEmbedding(out, ids, weight));
  const int64_t v = weight.dim(0), h = weight.dim(1);
  for (int64_t t = 0; t < ids.dim(0); ++t) {
    const int64_t id = ids.data_as<const int32_t>()[t];
    bf16* o = out.data_as<bf16>() + t * h;
    if (id < 0 || id >= v) {
      std::fill(o, o + h, bf16(0.f));
    } else {
      std::memcpy(o, weight.data_as<const bf16>() + id * h, h * sizeof(bf16));
    }
  }
  return Status::Ok();
}

}  // namespace cpu

Status EmbeddingForward(TensorView out, TensorView ids, TensorView weight, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d,
                   DispatchDevice("EmbeddingForward", {out, ids, weight}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda()) return cuda::EmbeddingForward(out, ids, weight, s);
#endif
  return cpu::EmbeddingForward(out, ids, weight, s);
}

}  // namespace tandem::kernels
