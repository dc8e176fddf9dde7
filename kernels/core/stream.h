// RAII wrappers for CUDA streams and events, a scoped current-device guard, NVTX ranges.
//
// Both wrappers are move-only and destroy their handle on destruction. In a build without
// CUDA, Create() returns Unavailable and CudaDeviceCount() is 0, so callers can branch once.
// Thread-safety: a CudaStream/CudaEvent may be used from several threads as CUDA allows
// (recording and querying are thread-safe in the runtime); moving one is not.
#pragma once

#include "kernels/core/dtype.h"
#include "runtime/core/status.h"

struct CUevent_st;

namespace tandem::kernels {

using Event = CUevent_st*;

// Number of visible CUDA devices (0 without CUDA, or when the driver reports none).
int CudaDeviceCount();

// Makes `device` current for the scope and restores the previous one after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// Names the enclosing scope in Nsight timelines (NVTX push/pop); a no-op without CUDA.
class NvtxRange {
 public:
  explicit NvtxRange(const char* name);
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

class CudaEvent;

class CudaStream {
 public:
  // A new stream on `device`; non-blocking (no implicit sync with the legacy default stream)
  // unless `blocking`. `priority`: lower is more urgent (cudaDeviceGetStreamPriorityRange).
  static Result<CudaStream> Create(int device, bool blocking = false, int priority = 0);
  CudaStream() = default;
  ~CudaStream();
  CudaStream(CudaStream&& o) noexcept;
  CudaStream& operator=(CudaStream&& o) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  Stream get() const { return stream_; }
  int device() const { return device_; }
  // Blocks the host until all queued work has finished.
  Status Synchronize() const;
  // Later work on this stream waits for `event` (no host block).
  Status Wait(const CudaEvent& event) const;

 private:
  Stream stream_ = nullptr;
  int device_ = -1;
};

// Later work on `stream` (a raw handle, e.g. a model's stream) waits for `event`, without
// blocking the host; a no-op in a build without CUDA.
Status StreamWaitEvent(Stream stream, const CudaEvent& event);

class CudaEvent {
 public:
  // A new event on `device`; `timing` enables ElapsedMs (slightly costlier to record).
  static Result<CudaEvent> Create(int device, bool timing = false);
  CudaEvent() = default;
  ~CudaEvent();
  CudaEvent(CudaEvent&& o) noexcept;
  CudaEvent& operator=(CudaEvent&& o) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  Event get() const { return event_; }
  // Captures the work queued on `stream` so far.
  Status Record(Stream stream) const;
  // True once the captured work has finished (never blocks).
  Result<bool> Done() const;
  Status Synchronize() const;
  // Milliseconds from `start` to this event. REQUIRES: both timing events, both completed.
  Result<float> ElapsedMsSince(const CudaEvent& start) const;

 private:
  Event event_ = nullptr;
  int device_ = -1;
};

}  // namespace tandem::kernels
