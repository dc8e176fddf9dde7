// CPU version of kernels/dflash2/row_topk.h (a partial sort per row), the shared checks and
// the dispatcher.
#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/dflash2/row_topk.h"
#include "kernels/elementwise/row_topk.h"

namespace tandem::kernels::dflash2 {
namespace internal {

Status CheckLogitTransform(const char* op, float multiplier, float softcap) {
  if (!std::isfinite(multiplier) || multiplier <= 0.f)
    return InvalidArgumentError("{}: multiplier must be finite and > 0, got {}", op, multiplier);
  if (!std::isfinite(softcap) || softcap < 0.f)
    return InvalidArgumentError("{}: softcap must be finite and >= 0 (0: none), got {}", op,
                                softcap);
  return Status::Ok();
}

float TransformLogit(float x, float multiplier, float softcap) {
  return softcap > 0.f ? softcap * std::tanh(x * (multiplier / softcap)) : x * multiplier;
}

Status CheckTopKOutputs(const char* op, const TensorView& ids, const TensorView& values,
                        int64_t rows, int64_t vocab, Device device, int64_t* k) {
  if (ids.ndim() != 2) return InvalidArgumentError("{}: ids {} must be 2-d", op, ids.ToString());
  *k = ids.dim(1);
  if (*k < 1 || *k > kLogitsTopKMax || *k > vocab)
    return InvalidArgumentError("{}: k = ids.shape[1] = {} must be in [1, min({}, V = {})]", op, *k,
                                kLogitsTopKMax, vocab);
  RETURN_IF_ERROR(ExpectDType(op, "ids", ids, DType::kI32));
  RETURN_IF_ERROR(ExpectShape(op, "ids", ids, Shape{rows, *k}));
  RETURN_IF_ERROR(ExpectContiguous(op, "ids", ids));
  if (ids.device() != device)
    return InvalidArgumentError("{}: ids {} is not on the logits' device", op, ids.ToString());
  if (!values.empty()) {
    RETURN_IF_ERROR(ExpectDType(op, "values", values, DType::kF32));
    RETURN_IF_ERROR(ExpectShape(op, "values", values, Shape{rows, *k}));
    RETURN_IF_ERROR(ExpectContiguous(op, "values", values));
    if (values.device() != device)
      return InvalidArgumentError("{}: values {} is not on the logits' device", op,
                                  values.ToString());
  }
  return Status::Ok();
}

Status CheckRowTopK(const char* op, const TensorView& ids, const TensorView& values,
                    const TensorView& logits, float multiplier, float softcap, int64_t* rows,
                    int64_t* vocab, int64_t* k) {
  RETURN_IF_ERROR(CheckLogitTransform(op, multiplier, softcap));
  if (logits.dtype() != DType::kBF16 && logits.dtype() != DType::kF32)
    return InvalidArgumentError("{}: logits: expected bf16 or f32, got {}", op, logits.ToString());
  if (logits.ndim() != 2 || ids.ndim() != 2)
    return InvalidArgumentError("{}: logits {} and ids {} must be 2-d", op, logits.ToString(),
                                ids.ToString());
  *rows = logits.dim(0);
  *vocab = logits.dim(1);
  if (*vocab > 0 && (logits.stride(1) != 1 || (*rows > 1 && logits.stride(0) < *vocab)))
    return InvalidArgumentError("{}: logits {}: the last dim must be contiguous", op,
                                logits.ToString());
  return CheckTopKOutputs(op, ids, values, *rows, *vocab, logits.device(), k);
}

}  // namespace internal

namespace cpu {

Status RowTopK(const TensorView& ids, const TensorView& values, const TensorView& logits,
               float multiplier, float softcap, Stream) {
  constexpr const char* kOp = "cpu::RowTopK";
  int64_t rows, v, k;
  RETURN_IF_ERROR(
      internal::CheckRowTopK(kOp, ids, values, logits, multiplier, softcap, &rows, &v, &k));
  if (!logits.device().is_cpu()) return InvalidArgumentError("{}: views must be on the CPU", kOp);
  std::vector<float> z(static_cast<size_t>(v));
  std::vector<uint32_t> key(static_cast<size_t>(v));
  std::vector<int32_t> order(static_cast<size_t>(v));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < v; ++j) {
      const int64_t at = r * logits.stride(0) + j;
      const float x = logits.dtype() == DType::kBF16 ? logits.data_as<const bf16>()[at].f()
                                                     : logits.data_as<const float>()[at];
      z[j] = internal::TransformLogit(x, multiplier, softcap);
      key[j] = kernels::internal::TopKKey(std::bit_cast<uint32_t>(z[j]));
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return key[a] > key[b] || (key[a] == key[b] && a < b);
    });
    for (int64_t i = 0; i < k; ++i) {
      ids.data_as<int32_t>()[r * k + i] = order[i];
      if (!values.empty()) values.data_as<float>()[r * k + i] = z[order[i]];
    }
  }
  return Status::Ok();
}

}  // namespace cpu

Status RowTopK(const TensorView& ids, const TensorView& values, const TensorView& logits,
               float multiplier, float softcap, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device dev, DispatchDevice("RowTopK", {ids, values, logits}));
#ifdef TANDEM_HAVE_CUDA
  if (dev.is_cuda()) return cuda::RowTopK(ids, values, logits, multiplier, softcap, s);
#endif
  return cpu::RowTopK(ids, values, logits, multiplier, softcap, s);
}

}  // namespace tandem::kernels::dflash2
