// Owning buffers and the allocators that make them.
//
// * `Allocator` is the seam: CPU (aligned host memory) or a per-device CUDA caching pool.
//   Pools belong to their owner (a job, a benchmark, a test: kernels/core/device_pools.h)
//   and are passed to what allocates; there is no process-wide pool.
// * `CachingPool` is the caching allocator, written against a `DeviceMemory` backend so its
//   bookkeeping is tested on the CPU with a fake (`FakeDeviceMemory`); the CUDA backend is
//   `NewCudaDeviceMemory`. It carves blocks best-fit out of large segments, keeps freed
//   blocks per stream (a block freed on stream S is reused at once by later work on S, which
//   is ordered after the free), coalesces neighbours, and only asks the backend for a new
//   segment when nothing cached fits, so a steady-state training step never calls cudaMalloc.
//   A tensor also used on another stream must say so (`Tensor::RecordStream`): its block is
//   then held back until an event recorded on that stream at free time has completed.
//   Blocks are keyed by stream handle: synchronise a stream before destroying it, since CUDA
//   may hand its handle to a new stream whose allocations would reuse those blocks at once.
// * `Tensor` is a move-only owning buffer; ops take the `TensorView` it hands out.
//
// Thread-safety: allocators are safe to call from any thread (one mutex per pool). A Tensor
// is a value owned by one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "kernels/core/tensor.h"
#include "runtime/core/status.h"
#include "runtime/core/thread_annotations.h"

namespace tandem::kernels {

struct AllocatorStats {
  int64_t in_use_bytes = 0;       // handed out, not yet freed (block sizes, rounded)
  int64_t cached_bytes = 0;       // reserved from the backend but not in use
  int64_t reserved_bytes = 0;     // in_use + cached: all memory held from the backend
  int64_t high_water_in_use = 0;  // max in_use_bytes since creation or ResetHighWater()
  int64_t high_water_reserved = 0;
  int64_t num_allocs = 0;          // Allocate() calls that succeeded
  int64_t num_backend_allocs = 0;  // segments obtained from the backend (cudaMalloc calls)
  int64_t num_backend_frees = 0;
  std::string ToString() const;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  // At least `nbytes` bytes, 256-byte aligned, for work ordered on `stream`. nbytes may be 0.
  virtual Result<void*> Allocate(int64_t nbytes, Stream stream) = 0;
  // Returns `ptr` (from Allocate); `extra_streams` are other streams that used it: the
  // memory is not reused until their work queued so far has finished.
  virtual void Free(void* ptr, Stream stream, const std::vector<Stream>& extra_streams) = 0;
  virtual AllocatorStats stats() const = 0;
};

// Page-aligned host memory (std::aligned_alloc); streams are ignored.
// The bookkeeping of an allocator that takes each buffer straight from its backend (no
// cache): sizes by pointer and the stats. Thread-safe (one mutex).
class DirectAllocationLedger {
 public:
  // Records a new buffer of `size` bytes at `p`.
  void Add(void* p, int64_t size) EXCLUDES(mu_);
  // Forgets `p`; a pointer it never recorded is a broken invariant of `owner` (CHECK).
  void Remove(void* p, const char* owner) EXCLUDES(mu_);
  AllocatorStats stats() const EXCLUDES(mu_);
  // Buffers still recorded.
  size_t live() const EXCLUDES(mu_);

 private:
  mutable std::mutex mu_;
  std::map<void*, int64_t> sizes_ GUARDED_BY(mu_);
  AllocatorStats stats_ GUARDED_BY(mu_);
};

class CpuAllocator : public Allocator {
 public:
  Device device() const override { return Device::Cpu(); }
  Result<void*> Allocate(int64_t nbytes, Stream stream) override;
  void Free(void* ptr, Stream stream, const std::vector<Stream>& extra_streams) override;
  AllocatorStats stats() const override { return ledger_.stats(); }

 private:
  DirectAllocationLedger ledger_;
};

// A process-wide CpuAllocator.
CpuAllocator& HostAllocator();

// Raw device memory and stream-ordered markers: what the caching pool needs from CUDA.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual Device device() const = 0;
  // OutOfMemory when the device has no room.
  virtual Result<void*> Malloc(int64_t nbytes) = 0;
  virtual void Free(void* ptr) = 0;
  // A marker recorded on `stream` now: done once all work queued on it so far has finished.
  virtual Result<void*> RecordMarker(Stream stream) = 0;
  virtual bool MarkerDone(void* marker) = 0;
  virtual void ReleaseMarker(void* marker) = 0;
  // Waits for all work on the device (before returning segments with pending markers).
  virtual void Synchronize() = 0;
};

// CUDA backend for `device` (cudaMalloc/cudaFree, events); Unavailable in CPU-only builds.
Result<std::unique_ptr<DeviceMemory>> NewCudaDeviceMemory(int device);

class CachingPool : public Allocator {
 public:
  explicit CachingPool(std::unique_ptr<DeviceMemory> backend);
  ~CachingPool() override;  // REQUIRES: nothing in use (checked).
  CachingPool(const CachingPool&) = delete;
  CachingPool& operator=(const CachingPool&) = delete;

  Device device() const override { return backend_->device(); }
  Result<void*> Allocate(int64_t nbytes, Stream stream) override;
  void Free(void* ptr, Stream stream, const std::vector<Stream>& extra_streams) override;
  AllocatorStats stats() const override;

  // Pre-grows the cache for `stream` by one segment of `nbytes`, so later allocations up
  // to that total are served without the backend.
  Status Reserve(int64_t nbytes, Stream stream);
  // Returns every fully free segment to the backend (waits for pending markers first).
  void ReleaseCached();
  void ResetHighWater();

  static constexpr int64_t kAlignment = 512;             // block granularity
  static constexpr int64_t kSmallSegment = 2 << 20;      // segment for requests < 1 MiB
  static constexpr int64_t kLargeGranularity = 2 << 20;  // larger segments round up to this

 private:
  struct Segment;
  struct Block {
    Segment* segment;
    char* ptr;
    int64_t size;
    bool in_use = false;
    Block* prev = nullptr;  // neighbours within the segment (address order)
    Block* next = nullptr;
    std::vector<void*> markers;  // pending markers of extra streams after free
  };
  struct Segment {
    char* base;
    int64_t size;
    Stream stream;
    int64_t blocks_in_use = 0;
  };
  struct BySize {
    bool operator()(const Block* a, const Block* b) const {
      return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
    }
  };

  Block* FindFree(Stream stream, int64_t size) REQUIRES(mu_);
  Result<Block*> NewSegment(Stream stream, int64_t size) REQUIRES(mu_);
  void InsertFree(Block* b) REQUIRES(mu_);
  void CollectPending() REQUIRES(mu_);
  void ReleaseCachedLocked() REQUIRES(mu_);
  void Account(int64_t in_use_delta, int64_t reserved_delta) REQUIRES(mu_);

  std::unique_ptr<DeviceMemory> backend_;
  mutable std::mutex mu_;
  std::map<Stream, std::set<Block*, BySize>> free_ GUARDED_BY(mu_);
  std::map<void*, Block*> allocated_ GUARDED_BY(mu_);
  std::vector<Block*> pending_ GUARDED_BY(mu_);  // freed, waiting on markers
  std::vector<std::unique_ptr<Segment>> segments_ GUARDED_BY(mu_);
  AllocatorStats stats_ GUARDED_BY(mu_);
};

// Move-only owning buffer: contiguous, row-major, on its allocator's device.
class Tensor {
 public:
  Tensor() = default;
  // Uninitialised storage for `shape` of `dtype`, for work on `stream`.
  static Result<Tensor> Empty(Allocator& alloc, DType dtype, Shape shape, Stream stream = nullptr);
  // Same, zero-filled (memset ordered on `stream`).
  static Result<Tensor> Zeros(Allocator& alloc, DType dtype, Shape shape, Stream stream = nullptr);
  ~Tensor() { Reset(); }
  Tensor(Tensor&& o) noexcept { *this = std::move(o); }
  Tensor& operator=(Tensor&& o) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  TensorView view() const { return view_; }
  operator TensorView() const { return view_; }  // NOLINT: a Tensor is usable as a view
  void* data() const { return view_.data(); }
  DType dtype() const { return view_.dtype(); }
  const Shape& shape() const { return view_.shape(); }
  int64_t numel() const { return view_.numel(); }
  int64_t nbytes() const { return view_.nbytes(); }
  Device device() const { return view_.device(); }
  bool empty() const { return alloc_ == nullptr; }
  // The allocator this tensor came from (null when empty): a model allocates its workspace
  // where its weights came from.
  Allocator* allocator() const { return alloc_; }

  // Declares that work on `other` (not the allocation stream) uses this buffer; the memory
  // is not reused before that work, as queued at destruction, has finished.
  void RecordStream(Stream other);
  // Frees now (as destruction does).
  void Reset();

 private:
  Allocator* alloc_ = nullptr;
  void* ptr_ = nullptr;
  Stream stream_ = nullptr;
  std::vector<Stream> extra_streams_;
  TensorView view_;
};

// Byte copies between views of equal nbytes (both contiguous), on `stream` when a CUDA
// device is involved (asynchronous with respect to the host for device-device copies).
Status Copy(TensorView dst, TensorView src, Stream stream);
Status CopyFromHost(TensorView dst, const void* host, Stream stream);
Status CopyToHost(void* host, TensorView src, Stream stream);
// Sets every byte of `dst` (contiguous) to zero, ordered on `stream`.
Status FillZero(TensorView dst, Stream stream);
// Waits for `stream` of `device` (no-op on the CPU).
Status SynchronizeStream(Device device, Stream stream);

}  // namespace tandem::kernels
