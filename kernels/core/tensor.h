// TensorView: a non-owning view of a strided n-d array (up to 6 dims) on the CPU or a
// CUDA device, carrying dtype and shape. Ops take views; owning buffers come from an
// allocator (kernels/core/memory.h) and hand out views.
//
// Shapes are row-major; strides are in elements. Narrow() makes a sub-view without copying.
// Thread-safety: value type; the memory it points at is the caller's to synchronise.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "kernels/core/dtype.h"
#include "runtime/core/status.h"

namespace tandem::kernels {

inline constexpr int kMaxDims = 6;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  static Shape FromArray(const int64_t* dims, int ndim);

  int ndim() const { return ndim_; }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t& operator[](int i) { return dims_[i]; }
  int64_t numel() const;
  bool operator==(const Shape& o) const;
  std::string ToString() const;  // "[16384, 4096]"

 private:
  std::array<int64_t, kMaxDims> dims_{};
  int ndim_ = 0;
};

class TensorView {
 public:
  TensorView() = default;
  // Contiguous row-major view.
  TensorView(void* data, DType dtype, Shape shape, Device device = Device::Cpu());

  void* data() const { return data_; }
  template <typename T>
  T* data_as() const { return static_cast<T*>(data_); }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return shape_.ndim(); }
  int64_t dim(int i) const { return shape_[i < 0 ? i + ndim() : i]; }
  int64_t stride(int i) const { return strides_[i < 0 ? i + ndim() : i]; }
  int64_t numel() const { return shape_.numel(); }
  int64_t nbytes() const { return numel() * DTypeSize(dtype_); }
  Device device() const { return device_; }
  bool empty() const { return data_ == nullptr; }
  bool is_contiguous() const;

  // Sub-view of `len` entries along `dim` starting at `start`. REQUIRES: in range.
  TensorView Narrow(int dim, int64_t start, int64_t len) const;
  // Same bytes, new contiguous shape with equal numel. REQUIRES: is_contiguous().
  TensorView Reshape(Shape shape) const;

  std::string ToString() const;  // "bf16[16384, 4096] cuda:0"

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  Shape shape_;
  std::array<int64_t, kMaxDims> strides_{};
  Device device_;
};

// Argument checks for op launchers. Each returns InvalidArgument naming `what` and the
// op (e.g. "RmsNormForward: x: expected bf16, got f32").
Status ExpectDType(const char* op, const char* what, const TensorView& t, DType dtype);
Status ExpectShape(const char* op, const char* what, const TensorView& t, const Shape& shape);
Status ExpectContiguous(const char* op, const char* what, const TensorView& t);
Status ExpectSameDevice(const char* op, const TensorView& a, const TensorView& b);

// For op dispatchers: the device the op runs on, i.e. that of the non-empty views, after
// checking they all share it. InvalidArgument when they differ, when all are empty, or when
// a CUDA view reaches a build without CUDA.
Result<Device> DispatchDevice(const char* op, std::initializer_list<TensorView> views);

}  // namespace tandem::kernels
