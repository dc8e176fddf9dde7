#include "kernels/core/tensor.h"

#include <fmt/format.h>

namespace tandem::kernels {

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kF32: return "f32";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
    case DType::kF8E4M3: return "f8e4m3";
    case DType::kF8E5M2: return "f8e5m2";
  }
  return "?";
}

Shape::Shape(std::initializer_list<int64_t> dims) {
  TANDEM_CHECK_MSG(dims.size() <= kMaxDims, "shape has {} dims, max {}", dims.size(), kMaxDims);
  for (int64_t d : dims) dims_[ndim_++] = d;
}

Shape Shape::FromArray(const int64_t* dims, int ndim) {
  TANDEM_CHECK_MSG(ndim >= 0 && ndim <= kMaxDims, "shape has {} dims, max {}", ndim, kMaxDims);
  Shape s;
  for (int i = 0; i < ndim; ++i) s.dims_[i] = dims[i];
  s.ndim_ = ndim;
  return s;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim_; ++i) n *= dims_[i];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (ndim_ != o.ndim_) return false;
  for (int i = 0; i < ndim_; ++i)
    if (dims_[i] != o.dims_[i]) return false;
  return true;
}

std::string Shape::ToString() const {
  std::string s = "[";
  for (int i = 0; i < ndim_; ++i) s += fmt::format("{}{}", i ? ", " : "", dims_[i]);
  return s + "]";
}

TensorView::TensorView(void* data, DType dtype, Shape shape, Device device)
    : data_(data), dtype_(dtype), shape_(shape), device_(device) {
  int64_t s = 1;
  for (int i = shape_.ndim() - 1; i >= 0; --i) {
    strides_[i] = s;
    s *= shape_[i];
  }
}

bool TensorView::is_contiguous() const {
  int64_t s = 1;
  for (int i = ndim() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != s) return false;
    s *= shape_[i];
  }
  return true;
}

TensorView TensorView::Narrow(int dim, int64_t start, int64_t len) const {
  if (dim < 0) dim += ndim();
  TANDEM_CHECK_MSG(dim >= 0 && dim < ndim() && start >= 0 && len >= 0 && start + len <= shape_[dim],
                   "Narrow({}, {}, {}) out of range for {}", dim, start, len, ToString());
  TensorView v = *this;
  v.data_ = static_cast<char*>(data_) + start * strides_[dim] * DTypeSize(dtype_);
  v.shape_[dim] = len;
  return v;
}

TensorView TensorView::Reshape(Shape shape) const {
  TANDEM_CHECK_MSG(is_contiguous(), "Reshape of non-contiguous {}", ToString());
  TANDEM_CHECK_MSG(shape.numel() == numel(), "Reshape {} -> {}: numel differs", ToString(),
                   shape.ToString());
  return TensorView(data_, dtype_, shape, device_);
}

std::string TensorView::ToString() const {
  return fmt::format("{}{} {}", DTypeName(dtype_), shape_.ToString(),
                     device_.is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", device_.index));
}

Status ExpectDType(const char* op, const char* what, const TensorView& t, DType dtype) {
  if (t.dtype() == dtype) return Status::Ok();
  return InvalidArgumentError("{}: {}: expected {}, got {}", op, what, DTypeName(dtype),
                              t.ToString());
}

Status ExpectShape(const char* op, const char* what, const TensorView& t, const Shape& shape) {
  if (t.shape() == shape) return Status::Ok();
  return InvalidArgumentError("{}: {}: expected shape {}, got {}", op, what, shape.ToString(),
                              t.ToString());
}

Status ExpectContiguous(const char* op, const char* what, const TensorView& t) {
  if (t.is_contiguous()) return Status::Ok();
  return InvalidArgumentError("{}: {} must be contiguous, got {}", op, what, t.ToString());
}

Status ExpectSameDevice(const char* op, const TensorView& a, const TensorView& b) {
  if (a.device() == b.device()) return Status::Ok();
  return InvalidArgumentError("{}: tensors on different devices: {} vs {}", op, a.ToString(),
                              b.ToString());
}

Result<Device> DispatchDevice(const char* op, std::initializer_list<TensorView> views) {
  const TensorView* first = nullptr;
  for (const TensorView& v : views) {
    if (v.empty()) continue;
    if (first == nullptr) {
      first = &v;
    } else {
      RETURN_IF_ERROR(ExpectSameDevice(op, *first, v));
    }
  }
  if (first == nullptr) return InvalidArgumentError("{}: all tensors are empty", op);
#ifndef TANDEM_HAVE_CUDA
  if (first->device().is_cuda())
    return InvalidArgumentError("{}: {} is on a CUDA device but tandem was built without CUDA "
                                "(reconfigure with -DTANDEM_CUDA=ON)", op, first->ToString());
#endif
  return first->device();
}

}  // namespace tandem::kernels
