#include "kernels/core/memory.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "runtime/core/clock.h"
#include "runtime/core/logging.h"

namespace tandem::kernels {
namespace {

int64_t RoundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

}  // namespace

std::string AllocatorStats::ToString() const {
  const auto b = [](int64_t n) { return FormatBytes(static_cast<uint64_t>(std::max<int64_t>(n, 0))); };
  return fmt::format(
      "in_use={} cached={} reserved={} high_water_in_use={} high_water_reserved={} "
      "allocs={} backend_allocs={} backend_frees={}",
      b(in_use_bytes), b(cached_bytes), b(reserved_bytes), b(high_water_in_use),
      b(high_water_reserved), num_allocs, num_backend_allocs, num_backend_frees);
}

// ---- CpuAllocator ----------------------------------------------------------------------

Result<void*> CpuAllocator::Allocate(int64_t nbytes, Stream) {
  if (nbytes < 0) return InvalidArgumentError("CpuAllocator: negative size {}", nbytes);
  int64_t size = RoundUp(std::max<int64_t>(nbytes, 1), 4096);
  void* p = std::aligned_alloc(4096, static_cast<size_t>(size));
  if (p == nullptr) return OutOfMemoryError("CpuAllocator: cannot allocate {} bytes", size);
  ledger_.Add(p, size);
  return p;
}

void CpuAllocator::Free(void* ptr, Stream, const std::vector<Stream>&) {
  ledger_.Remove(ptr, "CpuAllocator");
  std::free(ptr);
}

void DirectAllocationLedger::Add(void* p, int64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  sizes_[p] = size;
  stats_.in_use_bytes += size;
  stats_.reserved_bytes += size;
  stats_.high_water_in_use = std::max(stats_.high_water_in_use, stats_.in_use_bytes);
  stats_.high_water_reserved = std::max(stats_.high_water_reserved, stats_.reserved_bytes);
  ++stats_.num_allocs;
  ++stats_.num_backend_allocs;
}

void DirectAllocationLedger::Remove(void* p, const char* owner) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sizes_.find(p);
  TANDEM_CHECK_MSG(it != sizes_.end(), "{}::Free of unknown pointer {}", owner, p);
  stats_.in_use_bytes -= it->second;
  stats_.reserved_bytes -= it->second;
  ++stats_.num_backend_frees;
  sizes_.erase(it);
}

AllocatorStats DirectAllocationLedger::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

size_t DirectAllocationLedger::live() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sizes_.size();
}

CpuAllocator& HostAllocator() {
  static CpuAllocator* a = new CpuAllocator();  // never destroyed: outlives static tensors
  return *a;
}

// ---- CachingPool -----------------------------------------------------------------------

CachingPool::CachingPool(std::unique_ptr<DeviceMemory> backend) : backend_(std::move(backend)) {}

CachingPool::~CachingPool() {
  std::lock_guard<std::mutex> lock(mu_);
  TANDEM_CHECK_MSG(allocated_.empty(), "CachingPool destroyed with {} blocks in use ({})",
                   allocated_.size(), stats_.ToString());
  ReleaseCachedLocked();
}

void CachingPool::Account(int64_t in_use_delta, int64_t reserved_delta) {
  stats_.in_use_bytes += in_use_delta;
  stats_.reserved_bytes += reserved_delta;
  stats_.cached_bytes = stats_.reserved_bytes - stats_.in_use_bytes;
  stats_.high_water_in_use = std::max(stats_.high_water_in_use, stats_.in_use_bytes);
  stats_.high_water_reserved = std::max(stats_.high_water_reserved, stats_.reserved_bytes);
}

CachingPool::Block* CachingPool::FindFree(Stream stream, int64_t size) {
  auto fit = free_.find(stream);
  if (fit == free_.end()) return nullptr;
  Block probe{nullptr, nullptr, size, false, nullptr, nullptr, {}};
  auto it = fit->second.lower_bound(&probe);  // smallest block >= size (best fit)
  if (it == fit->second.end()) return nullptr;
  Block* b = *it;
  fit->second.erase(it);
  return b;
}

Result<CachingPool::Block*> CachingPool::NewSegment(Stream stream, int64_t size) {
  Result<void*> p = backend_->Malloc(size);
  if (!p.ok()) {
    if (p.status().code() != StatusCode::kOutOfMemory) return p.status();
    ReleaseCachedLocked();  // give back what is cached, then try once more
    p = backend_->Malloc(size);
    if (!p.ok()) return p.status().WithContext(fmt::format("CachingPool({})", stats_.ToString()));
  }
  auto seg = std::make_unique<Segment>(Segment{static_cast<char*>(*p), size, stream});
  Block* b = new Block{seg.get(), seg->base, size, false, nullptr, nullptr, {}};
  segments_.push_back(std::move(seg));
  ++stats_.num_backend_allocs;
  Account(0, size);
  return b;
}

void CachingPool::InsertFree(Block* b) {
  auto& set = free_[b->segment->stream];
  auto mergeable = [](Block* n) { return n != nullptr && !n->in_use && n->markers.empty(); };
  if (mergeable(b->prev) && set.count(b->prev)) {
    Block* p = b->prev;
    set.erase(p);
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    delete b;
    b = p;
  }
  if (mergeable(b->next) && set.count(b->next)) {
    Block* n = b->next;
    set.erase(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    delete n;
  }
  set.insert(b);
}

void CachingPool::CollectPending() {
  auto done = [&](Block* b) {
    for (void* m : b->markers)
      if (!backend_->MarkerDone(m)) return false;
    return true;
  };
  std::vector<Block*> still;
  for (Block* b : pending_) {
    if (!done(b)) {
      still.push_back(b);
      continue;
    }
    for (void* m : b->markers) backend_->ReleaseMarker(m);
    b->markers.clear();
    InsertFree(b);
  }
  pending_ = std::move(still);
}

Result<void*> CachingPool::Allocate(int64_t nbytes, Stream stream) {
  if (nbytes < 0) return InvalidArgumentError("CachingPool: negative size {}", nbytes);
  int64_t size = RoundUp(std::max<int64_t>(nbytes, 1), kAlignment);
  std::lock_guard<std::mutex> lock(mu_);
  if (!pending_.empty()) CollectPending();
  Block* b = FindFree(stream, size);
  if (b == nullptr) {
    int64_t seg = size < (1 << 20) ? kSmallSegment : RoundUp(size, kLargeGranularity);
    ASSIGN_OR_RETURN(b, NewSegment(stream, seg));
  }
  if (b->size - size >= kAlignment) {  // split; the rest stays cached
    Block* rest = new Block{b->segment, b->ptr + size, b->size - size, false, nullptr, nullptr, {}};
    rest->prev = b;
    rest->next = b->next;
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->size = size;
    InsertFree(rest);
  }
  b->in_use = true;
  ++b->segment->blocks_in_use;
  allocated_[b->ptr] = b;
  ++stats_.num_allocs;
  Account(b->size, 0);
  return static_cast<void*>(b->ptr);
}

void CachingPool::Free(void* ptr, Stream stream, const std::vector<Stream>& extra_streams) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocated_.find(ptr);
  TANDEM_CHECK_MSG(it != allocated_.end(), "CachingPool::Free of unknown pointer {}", ptr);
  Block* b = it->second;
  allocated_.erase(it);
  b->in_use = false;
  --b->segment->blocks_in_use;
  Account(-b->size, 0);
  // Later work on the owning stream is ordered after this free; other streams get a marker.
  std::vector<Stream> others;
  for (Stream s : extra_streams)
    if (s != b->segment->stream && std::find(others.begin(), others.end(), s) == others.end())
      others.push_back(s);
  if (stream != b->segment->stream &&
      std::find(others.begin(), others.end(), stream) == others.end())
    others.push_back(stream);
  for (Stream s : others) {
    Result<void*> m = backend_->RecordMarker(s);
    if (m.ok()) {
      b->markers.push_back(*m);
    } else {
      TLOG_WARN("CachingPool: {}; synchronising the device instead", m.status().ToString());
      backend_->Synchronize();
    }
  }
  if (b->markers.empty()) {
    InsertFree(b);
  } else {
    pending_.push_back(b);
  }
}

AllocatorStats CachingPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

Status CachingPool::Reserve(int64_t nbytes, Stream stream) {
  if (nbytes <= 0) return InvalidArgumentError("CachingPool::Reserve: size {} <= 0", nbytes);
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Block * b, NewSegment(stream, RoundUp(nbytes, kLargeGranularity)));
  InsertFree(b);
  return Status::Ok();
}

void CachingPool::ReleaseCached() {
  std::lock_guard<std::mutex> lock(mu_);
  ReleaseCachedLocked();
}

void CachingPool::ReleaseCachedLocked() {
  if (!pending_.empty()) {
    backend_->Synchronize();
    CollectPending();
  }
  std::vector<std::unique_ptr<Segment>> kept;
  for (auto& seg : segments_) {
    if (seg->blocks_in_use > 0) {
      kept.push_back(std::move(seg));
      continue;
    }
    // A segment with nothing in use and nothing pending is one coalesced free block.
    auto& set = free_[seg->stream];
    auto bit =
        std::find_if(set.begin(), set.end(), [&](Block* b) { return b->segment == seg.get(); });
    TANDEM_CHECK_MSG(bit != set.end() && (*bit)->size == seg->size,
                     "CachingPool: free segment is not one block");
    delete *bit;
    set.erase(bit);
    backend_->Free(seg->base);
    ++stats_.num_backend_frees;
    Account(0, -seg->size);
  }
  segments_ = std::move(kept);
}

void CachingPool::ResetHighWater() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.high_water_in_use = stats_.in_use_bytes;
  stats_.high_water_reserved = stats_.reserved_bytes;
}

// ---- Tensor ------------------------------------------------------------------------------

Result<Tensor> Tensor::Empty(Allocator& alloc, DType dtype, Shape shape, Stream stream) {
  for (int i = 0; i < shape.ndim(); ++i)
    if (shape[i] < 0) return InvalidArgumentError("Tensor: negative dim in {}", shape.ToString());
  ASSIGN_OR_RETURN(void* p, alloc.Allocate(shape.numel() * DTypeSize(dtype), stream));
  Tensor t;
  t.alloc_ = &alloc;
  t.ptr_ = p;
  t.stream_ = stream;
  t.view_ = TensorView(p, dtype, shape, alloc.device());
  return t;
}

Result<Tensor> Tensor::Zeros(Allocator& alloc, DType dtype, Shape shape, Stream stream) {
  ASSIGN_OR_RETURN(Tensor t, Empty(alloc, dtype, shape, stream));
  RETURN_IF_ERROR(FillZero(t.view(), stream));
  return t;
}

Tensor& Tensor::operator=(Tensor&& o) noexcept {
  if (this != &o) {
    Reset();
    alloc_ = o.alloc_;
    ptr_ = o.ptr_;
    stream_ = o.stream_;
    extra_streams_ = std::move(o.extra_streams_);
    view_ = o.view_;
    o.alloc_ = nullptr;
    o.ptr_ = nullptr;
    o.extra_streams_.clear();
    o.view_ = TensorView();
  }
  return *this;
}

void Tensor::RecordStream(Stream other) {
  if (other != stream_ &&
      std::find(extra_streams_.begin(), extra_streams_.end(), other) == extra_streams_.end())
    extra_streams_.push_back(other);
}

void Tensor::Reset() {
  if (alloc_ != nullptr) alloc_->Free(ptr_, stream_, extra_streams_);
  alloc_ = nullptr;
  ptr_ = nullptr;
  extra_streams_.clear();
  view_ = TensorView();
}

}  // namespace tandem::kernels
