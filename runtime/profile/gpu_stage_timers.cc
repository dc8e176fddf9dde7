#include "runtime/profile/gpu_stage_timers.h"

#include <algorithm>
#include <cmath>

#include <nvtx3/nvToolsExt.h>

namespace tandem {

namespace {

Status CudaStatus(cudaError_t e, const char* what) {
  return CudaError("GpuStageTimers: {}: {}", what, cudaGetErrorString(e));
}

}  // namespace

GpuScope::GpuScope(GpuScope&& other) noexcept
    : owner_(other.owner_), slot_(other.slot_), stream_(other.stream_), active_(other.active_) {
  other.active_ = false;
}

void GpuScope::End() {
  if (!active_) return;
  active_ = false;
  if (slot_ >= 0) owner_->Finish(slot_, stream_);
  nvtxRangePop();
}

GpuStageTimers::GpuStageTimers(ProfileStats* stats, int pool_size)
    : stats_(stats), pool_size_(pool_size), pairs_(pool_size) {
  std::lock_guard lock(mu_);
  free_.reserve(pool_size);
  pending_.reserve(pool_size);
  for (int i = pool_size - 1; i >= 0; --i) free_.push_back(i);
}

Result<std::unique_ptr<GpuStageTimers>> GpuStageTimers::Create(ProfileStats* stats,
                                                               int pool_size) {
  if (pool_size < 1) return InvalidArgumentError("GpuStageTimers: pool_size must be >= 1");
  std::unique_ptr<GpuStageTimers> t(new GpuStageTimers(stats, pool_size));
  for (EventPair& p : t->pairs_) {
    if (cudaError_t e = cudaEventCreate(&p.start); e != cudaSuccess) {
      return CudaStatus(e, "cudaEventCreate");
    }
    if (cudaError_t e = cudaEventCreate(&p.end); e != cudaSuccess) {
      return CudaStatus(e, "cudaEventCreate");
    }
  }
  {
    std::lock_guard lock(t->poll_mu_);
    t->scratch_.reserve(pool_size);
    t->done_.reserve(pool_size);
  }
  GpuStageTimers* raw = t.get();
  t->hook_id_ = stats->AddPreRollHook([raw] { raw->Poll(); });
  return t;
}

GpuStageTimers::~GpuStageTimers() {
  if (hook_id_ >= 0) stats_->RemovePreRollHook(hook_id_);
  // Destroying an event whose work is still queued is allowed; CUDA releases it later.
  for (EventPair& p : pairs_) {
    if (p.start) cudaEventDestroy(p.start);
    if (p.end) cudaEventDestroy(p.end);
  }
}

GpuScope GpuStageTimers::Scope(StageHandle stage, cudaStream_t stream) {
  PollUpTo(kPollPerScope, /*stop_at_unfinished=*/true);
  int slot = -1;
  {
    std::lock_guard lock(mu_);
    if (free_.empty()) {
      ++dropped_;
    } else {
      slot = free_.back();
      free_.pop_back();
    }
  }
  nvtxRangePushA(stage.name().c_str());
  if (slot >= 0) {
    pairs_[slot].stage = stage;
    if (cudaError_t e = cudaEventRecord(pairs_[slot].start, stream); e != cudaSuccess) {
      {
        std::lock_guard lock(mu_);
        ++errors_;
        last_error_ = CudaStatus(e, "cudaEventRecord(start)");
      }
      Release(slot);
      slot = -1;
    }
  }
  return GpuScope(this, slot, stream);
}

void GpuStageTimers::Finish(int slot, cudaStream_t stream) {
  cudaError_t e = cudaEventRecord(pairs_[slot].end, stream);
  std::lock_guard lock(mu_);
  if (e != cudaSuccess) {
    ++errors_;
    last_error_ = CudaStatus(e, "cudaEventRecord(end)");
    free_.push_back(slot);
    return;
  }
  pending_.push_back(slot);
}

void GpuStageTimers::Release(int slot) {
  std::lock_guard lock(mu_);
  free_.push_back(slot);
}

int GpuStageTimers::PollUpTo(int max, bool stop_at_unfinished) {
  std::unique_lock poll(poll_mu_, std::try_to_lock);
  if (!poll.owns_lock()) return 0;
  {
    std::lock_guard lock(mu_);
    const size_t n = std::min<size_t>(max, pending_.size());
    scratch_.assign(pending_.begin(), pending_.begin() + n);
  }
  done_.clear();
  int resolved = 0;
  for (int slot : scratch_) {
    EventPair& p = pairs_[slot];
    cudaError_t e = cudaEventQuery(p.end);
    if (e == cudaErrorNotReady) {
      (void)cudaGetLastError();  // "not ready" is an answer, not an error to leave behind
      if (stop_at_unfinished) break;
      continue;
    }
    float ms = 0;
    if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, p.start, p.end);
    if (e == cudaSuccess) {
      p.stage.Record(std::llround(static_cast<double>(ms) * 1e6));
      ++resolved;
    } else {
      std::lock_guard lock(mu_);
      ++errors_;
      last_error_ = CudaStatus(e, "cudaEventQuery/ElapsedTime");
    }
    done_.push_back(slot);
  }
  if (!done_.empty()) {
    std::lock_guard lock(mu_);
    std::erase_if(pending_, [this](int s) {
      return std::find(done_.begin(), done_.end(), s) != done_.end();
    });
    for (int s : done_) free_.push_back(s);
  }
  return resolved;
}

size_t GpuStageTimers::pending() const {
  std::lock_guard lock(mu_);
  return pending_.size();
}

uint64_t GpuStageTimers::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

uint64_t GpuStageTimers::errors() const {
  std::lock_guard lock(mu_);
  return errors_;
}

Status GpuStageTimers::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

}  // namespace tandem
