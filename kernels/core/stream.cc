#include "kernels/core/stream.h"

#include <utility>

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#include "kernels/core/cuda_check.h"
#endif

namespace tandem::kernels {

#ifdef TANDEM_HAVE_CUDA

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

NvtxRange::NvtxRange(const char* name) { nvtxRangePushA(name); }
NvtxRange::~NvtxRange() { nvtxRangePop(); }

DeviceGuard::DeviceGuard(int device) {
  CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  CUDA_CHECK(cudaGetDevice(&now));
  if (now != previous_) CUDA_CHECK(cudaSetDevice(previous_));
}

Result<CudaStream> CudaStream::Create(int device, bool blocking, int priority) {
  DeviceGuard g(device);
  CudaStream s;
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithPriority(
      &s.stream_, blocking ? cudaStreamDefault : cudaStreamNonBlocking, priority));
  s.device_ = device;
  return s;
}

CudaStream::~CudaStream() {
  if (stream_ != nullptr) CUDA_CHECK(cudaStreamDestroy(stream_));
}

Status CudaStream::Synchronize() const {
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return Status::Ok();
}

Status CudaStream::Wait(const CudaEvent& event) const {
  CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_, event.get(), 0));
  return Status::Ok();
}

Status StreamWaitEvent(Stream stream, const CudaEvent& event) {
  CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, event.get(), 0));
  return Status::Ok();
}

Result<CudaEvent> CudaEvent::Create(int device, bool timing) {
  DeviceGuard g(device);
  CudaEvent e;
  CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&e.event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  e.device_ = device;
  return e;
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) CUDA_CHECK(cudaEventDestroy(event_));
}

Status CudaEvent::Record(Stream stream) const {
  CUDA_RETURN_IF_ERROR(cudaEventRecord(event_, stream));
  return Status::Ok();
}

Result<bool> CudaEvent::Done() const {
  cudaError_t e = cudaEventQuery(event_);
  if (e == cudaErrorNotReady) return false;
  CUDA_RETURN_IF_ERROR(e);
  return true;
}

Status CudaEvent::Synchronize() const {
  CUDA_RETURN_IF_ERROR(cudaEventSynchronize(event_));
  return Status::Ok();
}

Result<float> CudaEvent::ElapsedMsSince(const CudaEvent& start) const {
  float ms = 0;
  CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

#else  // !TANDEM_HAVE_CUDA

int CudaDeviceCount() { return 0; }
NvtxRange::NvtxRange(const char*) {}
NvtxRange::~NvtxRange() = default;
DeviceGuard::DeviceGuard(int) {}
DeviceGuard::~DeviceGuard() = default;
Result<CudaStream> CudaStream::Create(int, bool, int) {
  return UnavailableError("CudaStream: tandem was built without CUDA");
}
CudaStream::~CudaStream() = default;
Status CudaStream::Synchronize() const { return Status::Ok(); }
Status CudaStream::Wait(const CudaEvent&) const { return Status::Ok(); }
Status StreamWaitEvent(Stream, const CudaEvent&) { return Status::Ok(); }
Result<CudaEvent> CudaEvent::Create(int, bool) {
  return UnavailableError("CudaEvent: tandem was built without CUDA");
}
CudaEvent::~CudaEvent() = default;
Status CudaEvent::Record(Stream) const { return Status::Ok(); }
Result<bool> CudaEvent::Done() const { return true; }
Status CudaEvent::Synchronize() const { return Status::Ok(); }
Result<float> CudaEvent::ElapsedMsSince(const CudaEvent&) const {
  return UnavailableError("CudaEvent: tandem was built without CUDA");
}

#endif  // TANDEM_HAVE_CUDA

CudaStream::CudaStream(CudaStream&& o) noexcept
    : stream_(std::exchange(o.stream_, nullptr)), device_(std::exchange(o.device_, -1)) {}

CudaStream& CudaStream::operator=(CudaStream&& o) noexcept {
  if (this != &o) {
    CudaStream old(std::move(*this));
    stream_ = std::exchange(o.stream_, nullptr);
    device_ = std::exchange(o.device_, -1);
  }
  return *this;
}

CudaEvent::CudaEvent(CudaEvent&& o) noexcept
    : event_(std::exchange(o.event_, nullptr)), device_(std::exchange(o.device_, -1)) {}

CudaEvent& CudaEvent::operator=(CudaEvent&& o) noexcept {
  if (this != &o) {
    CudaEvent old(std::move(*this));
    event_ = std::exchange(o.event_, nullptr);
    device_ = std::exchange(o.device_, -1);
  }
  return *this;
}

}  // namespace tandem::kernels
