// The CUDA side of kernels/core/memory.h: the cudaMalloc/event backend of the caching pool
// (the pools themselves belong to a DevicePools: device_pools.h), and copies/fills that may
// involve device memory. In a CPU-only build the same functions handle host memory and
// refuse device memory with a clear error.
#include <cstring>
#include <vector>

#include "kernels/core/memory.h"
#include "kernels/core/stream.h"
#include "runtime/core/clock.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/core/cuda_check.h"
#endif

namespace tandem::kernels {
namespace {

[[maybe_unused]] Status NoCuda(const char* what) {
  return UnavailableError(
      "{}: device memory needs CUDA, and tandem was built without it "
      "(reconfigure with -DTANDEM_CUDA=ON)",
      what);
}

#ifdef TANDEM_HAVE_CUDA
class CudaDeviceMemory : public DeviceMemory {
 public:
  explicit CudaDeviceMemory(int device) : device_(device) {}
  ~CudaDeviceMemory() override {
    DeviceGuard g(device_);
    for (void* e : spare_events_) CUDA_CHECK(cudaEventDestroy(static_cast<cudaEvent_t>(e)));
  }

  Device device() const override { return Device::Cuda(device_); }

  Result<void*> Malloc(int64_t nbytes) override {
    DeviceGuard g(device_);
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, static_cast<size_t>(nbytes));
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      (void)cudaMemGetInfo(&free_b, &total_b);
      (void)cudaGetLastError();
      return OutOfMemoryError("cudaMalloc of {} ({} bytes) on cuda:{} failed: device memory "
                              "full ({} free of {})", FormatBytes(static_cast<uint64_t>(nbytes)),
                              nbytes, device_, FormatBytes(free_b), FormatBytes(total_b));
    }
    CUDA_RETURN_IF_ERROR(e);
    return p;
  }

  void Free(void* ptr) override {
    DeviceGuard g(device_);
    CUDA_CHECK(cudaFree(ptr));
  }

  Result<void*> RecordMarker(Stream stream) override {
    DeviceGuard g(device_);
    cudaEvent_t ev;
    if (!spare_events_.empty()) {
      ev = static_cast<cudaEvent_t>(spare_events_.back());
      spare_events_.pop_back();
    } else {
      CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    }
    CUDA_RETURN_IF_ERROR(cudaEventRecord(ev, stream));
    return static_cast<void*>(ev);
  }

  bool MarkerDone(void* marker) override {
    cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(marker));
    if (e == cudaErrorNotReady) return false;
    CUDA_CHECK(e);
    return true;
  }

  void ReleaseMarker(void* marker) override { spare_events_.push_back(marker); }

  void Synchronize() override {
    DeviceGuard g(device_);
    CUDA_CHECK(cudaDeviceSynchronize());
  }

 private:
  int device_;
  std::vector<void*> spare_events_;  // guarded by the owning pool's mutex
};
#endif

}  // namespace

Result<std::unique_ptr<DeviceMemory>> NewCudaDeviceMemory(int device) {
#ifdef TANDEM_HAVE_CUDA
  int n = CudaDeviceCount();
  if (device < 0 || device >= n)
    return InvalidArgumentError("NewCudaDeviceMemory: device {} not in [0, {})", device, n);
  return std::unique_ptr<DeviceMemory>(new CudaDeviceMemory(device));
#else
  return NoCuda("NewCudaDeviceMemory");
#endif
}

Status Copy(TensorView dst, TensorView src, Stream stream) {
  RETURN_IF_ERROR(ExpectContiguous("Copy", "dst", dst));
  RETURN_IF_ERROR(ExpectContiguous("Copy", "src", src));
  if (dst.nbytes() != src.nbytes())
    return InvalidArgumentError("Copy: {} bytes into {} bytes ({} <- {})", src.nbytes(),
                                dst.nbytes(), dst.ToString(), src.ToString());
  if (dst.nbytes() == 0) return Status::Ok();
  if (dst.device().is_cpu() && src.device().is_cpu()) {
    std::memmove(dst.data(), src.data(), dst.nbytes());
    return Status::Ok();
  }
#ifdef TANDEM_HAVE_CUDA
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst.data(), src.data(), dst.nbytes(), cudaMemcpyDefault, stream));
  return Status::Ok();
#else
  return NoCuda("Copy");
#endif
}

Status CopyFromHost(TensorView dst, const void* host, Stream stream) {
  return Copy(dst, TensorView(const_cast<void*>(host), DType::kU8, {dst.nbytes()}), stream);
}

Status CopyToHost(void* host, TensorView src, Stream stream) {
  return Copy(TensorView(host, DType::kU8, {src.nbytes()}), src, stream);
}

Status FillZero(TensorView dst, Stream stream) {
  RETURN_IF_ERROR(ExpectContiguous("FillZero", "dst", dst));
  if (dst.nbytes() == 0) return Status::Ok();
  if (dst.device().is_cpu()) {
    std::memset(dst.data(), 0, dst.nbytes());
    return Status::Ok();
  }
#ifdef TANDEM_HAVE_CUDA
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dst.data(), 0, dst.nbytes(), stream));
  return Status::Ok();
#else
  return NoCuda("FillZero");
#endif
}

Status SynchronizeStream(Device device, Stream stream) {
  if (device.is_cpu()) return Status::Ok();
#ifdef TANDEM_HAVE_CUDA
  DeviceGuard g(device.index);
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return Status::Ok();
#else
  return NoCuda("SynchronizeStream");
#endif
}

}  // namespace tandem::kernels
