// A DeviceMemory fake for testing CachingPool on the CPU: host-backed "device" memory with
// a capacity, counted calls, and markers that complete only when the test says so.
// Thread-safety: none (tests drive it from one thread).
#pragma once

#include <cstdlib>
#include <map>
#include <set>

#include "kernels/core/memory.h"

namespace tandem::kernels::testing {

class FakeDeviceMemory : public DeviceMemory {
 public:
  // Shared counters, readable after the pool takes ownership of the fake.
  struct State {
    int64_t capacity = int64_t{1} << 40;
    int64_t used = 0;
    int mallocs = 0;
    int frees = 0;
    int syncs = 0;
    std::map<void*, int64_t> live;
    std::set<int> pending_markers;  // recorded, not completed
    std::map<int, Stream> marker_stream;
    int next_marker = 1;
    // Completes every marker recorded on `s`.
    void CompleteStream(Stream s) {
      for (auto it = pending_markers.begin(); it != pending_markers.end();)
        it = marker_stream[*it] == s ? pending_markers.erase(it) : std::next(it);
    }
  };

  // Stands for CUDA device `index`.
  explicit FakeDeviceMemory(State* state, int index = 0) : s_(state), index_(index) {}
  Device device() const override { return Device::Cuda(index_); }
  Result<void*> Malloc(int64_t n) override {
    if (s_->used + n > s_->capacity)
      return OutOfMemoryError("fake device full ({} + {})", s_->used, n);
    void* p = std::aligned_alloc(4096, static_cast<size_t>((n + 4095) / 4096 * 4096));
    s_->used += n;
    s_->live[p] = n;
    ++s_->mallocs;
    return p;
  }
  void Free(void* p) override {
    TANDEM_CHECK(s_->live.count(p));
    s_->used -= s_->live[p];
    s_->live.erase(p);
    ++s_->frees;
    std::free(p);
  }
  Result<void*> RecordMarker(Stream stream) override {
    int id = s_->next_marker++;
    s_->pending_markers.insert(id);
    s_->marker_stream[id] = stream;
    return reinterpret_cast<void*>(static_cast<intptr_t>(id));
  }
  bool MarkerDone(void* m) override {
    return s_->pending_markers.count(static_cast<int>(reinterpret_cast<intptr_t>(m))) == 0;
  }
  void ReleaseMarker(void*) override {}
  void Synchronize() override {
    ++s_->syncs;
    s_->pending_markers.clear();
  }

 private:
  State* s_;
  int index_;
};

}  // namespace tandem::kernels::testing
