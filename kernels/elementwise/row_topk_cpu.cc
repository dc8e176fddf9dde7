// CPU reference for kernels/elementwise/row_topk.h, checks, and the dispatcher.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/elementwise/row_topk.h"

namespace tandem::kernels {
namespace internal {

Status CheckRowTopK(const TensorView& ids, const TensorView& vals, const TensorView& x) {
  constexpr const char* kOp = "RowTopK";
  RETURN_IF_ERROR(ExpectDType(kOp, "x", x, DType::kF32));
  RETURN_IF_ERROR(ExpectDType(kOp, "ids", ids, DType::kI32));
  RETURN_IF_ERROR(ExpectDType(kOp, "vals", vals, DType::kF32));
  if (x.ndim() != 2 || ids.ndim() != 2)
    return InvalidArgumentError("{}: x and ids must be [R, V] and [R, K], got {} and {}", kOp,
                                x.ToString(), ids.ToString());
  const int64_t k = ids.dim(1);
  if (k < 1 || k > x.dim(1) || k > kRowTopKMax)
    return InvalidArgumentError("{}: K = {} must be in [1, min(V = {}, {})]", kOp, k, x.dim(1),
                                kRowTopKMax);
  RETURN_IF_ERROR(ExpectShape(kOp, "ids", ids, Shape{x.dim(0), k}));
  RETURN_IF_ERROR(ExpectShape(kOp, "vals", vals, Shape{x.dim(0), k}));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "x", x));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "ids", ids));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "vals", vals));
  RETURN_IF_ERROR(ExpectSameDevice(kOp, ids, x));
  return ExpectSameDevice(kOp, vals, x);
}

}  // namespace internal

namespace cpu {

Status RowTopK(TensorView ids, TensorView vals, TensorView x, Stream) {
  RETURN_IF_ERROR(internal::CheckRowTopK(ids, vals, x));
  const int64_t rows = x.dim(0), v = x.dim(1), k = ids.dim(1);
  const float* in = x.data_as<const float>();
  std::vector<uint32_t> key(static_cast<size_t>(v));
  std::vector<int32_t> order(static_cast<size_t>(v));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = in + r * v;
    for (int64_t j = 0; j < v; ++j) {
      uint32_t bits;
      std::memcpy(&bits, row + j, 4);
      key[j] = internal::TopKKey(bits);
    }
    std::iota(order.begin(), order.end(), 0);
    std::nth_element(
        order.begin(), order.begin() + (k - 1), order.end(),
        [&](int32_t a, int32_t b) { return key[a] > key[b] || (key[a] == key[b] && a < b); });
    std::sort(order.begin(), order.begin() + k);
    for (int64_t i = 0; i < k; ++i) {
      ids.data_as<int32_t>()[r * k + i] = order[i];
      vals.data_as<float>()[r * k + i] = row[order[i]];
    }
  }
  return Status::Ok();
}

}  // namespace cpu

Status RowTopK(TensorView ids, TensorView vals, TensorView x, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d, DispatchDevice("RowTopK", {ids, vals, x}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda()) return cuda::RowTopK(ids, vals, x, s);
#endif
  return cpu::RowTopK(ids, vals, x, s);
}

}  // namespace tandem::kernels
