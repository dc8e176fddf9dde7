// GpuStageTimers: time stages on a CUDA stream with event pairs, without ever waiting for
// the GPU in the caller's loop.
//
//   ASSIGN_OR_RETURN(auto gpu, GpuStageTimers::Create(&prof, /*pool_size=*/256));
//   { auto t = gpu->Scope(prof.Stage("target.model_forward"), stream); Forward(stream); }
//
// A scope records a start event on `stream` when it begins and an end event when it ends,
// then queues the pair as pending. Pending pairs are resolved with cudaEventQuery (never a
// synchronize): a few at each new scope (in order, stopping at the first unfinished one),
// and all of them before every ProfileStats::RollWindow (a pre-roll hook), so a report
// contains every stage the GPU has finished. Resolved GPU durations go into the stage like
// wall-clock samples. When every pair is pending, a new scope is not timed and counts in
// dropped(); the pool is fixed at Create, so timing never allocates or creates events.
//
// Name a stage `<prefix>.gpu.<what>` (e.g. `drafter.gpu.step`) when it times an actor's work
// on its compute stream: the job's bottleneck verdict weighs such stages of actors sharing a
// GPU against each other (runtime/job/gpu_verdict.h).
//
// Only built with CUDA. Events belong to the device current at Create; use one instance per
// device, on streams of that device.
//
// Thread-safety: all methods are safe from any thread. A scope's internal lock covers only
// pool bookkeeping; event queries run outside it and concurrent polls do not wait for each
// other (a poll that finds another in progress returns).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/core/status.h"
#include "runtime/core/thread_annotations.h"
#include "runtime/profile/profile_stats.h"

namespace tandem {

class GpuStageTimers;

// Times its lifetime on a stream; see GpuStageTimers::Scope. Move-only.
class GpuScope {
 public:
  GpuScope(GpuScope&& other) noexcept;
  GpuScope(const GpuScope&) = delete;
  GpuScope& operator=(const GpuScope&) = delete;
  GpuScope& operator=(GpuScope&&) = delete;
  ~GpuScope() { End(); }
  // Records the end event now; later calls do nothing.
  void End();
  // False when the pool was exhausted (or recording failed) and this scope is not timed.
  bool timed() const { return slot_ >= 0; }

 private:
  friend class GpuStageTimers;
  GpuScope(GpuStageTimers* owner, int slot, cudaStream_t stream)
      : owner_(owner), slot_(slot), stream_(stream) {}
  GpuStageTimers* owner_;
  int slot_;
  cudaStream_t stream_;
  bool active_ = true;
};

class GpuStageTimers {
 public:
  // Creates `pool_size` event pairs on the current device and registers a pre-roll hook on
  // `stats`, which must outlive this object.
  static Result<std::unique_ptr<GpuStageTimers>> Create(ProfileStats* stats, int pool_size);
  ~GpuStageTimers();
  GpuStageTimers(const GpuStageTimers&) = delete;
  GpuStageTimers& operator=(const GpuStageTimers&) = delete;

  // Starts timing `stage` on `stream` (and an NVTX range with its name). Never blocks on
  // the GPU.
  GpuScope Scope(StageHandle stage, cudaStream_t stream);

  // Resolves finished pairs into their stages; returns how many. Never blocks on the GPU.
  int Poll() { return PollUpTo(pool_size_, /*stop_at_unfinished=*/false); }

  size_t pending() const EXCLUDES(mu_);
  uint64_t dropped() const EXCLUDES(mu_);
  // Pairs whose events reported an error (their samples are discarded) and the last error.
  uint64_t errors() const EXCLUDES(mu_);
  Status last_error() const EXCLUDES(mu_);

 private:
  friend class GpuScope;
  struct EventPair {
    cudaEvent_t start = nullptr;
    cudaEvent_t end = nullptr;
    StageHandle stage;
  };

  GpuStageTimers(ProfileStats* stats, int pool_size);
  void Finish(int slot, cudaStream_t stream);
  void Release(int slot) EXCLUDES(mu_);
  int PollUpTo(int max, bool stop_at_unfinished);

  static constexpr int kPollPerScope = 4;

  ProfileStats* const stats_;
  const int pool_size_;
  int hook_id_ = -1;
  std::vector<EventPair> pairs_;  // fixed after Create; a slot's stage is written by its owner

  mutable std::mutex mu_;
  std::vector<int> free_ GUARDED_BY(mu_);
  std::vector<int> pending_ GUARDED_BY(mu_);  // in the order their end events were recorded
  uint64_t dropped_ GUARDED_BY(mu_) = 0;
  uint64_t errors_ GUARDED_BY(mu_) = 0;
  Status last_error_ GUARDED_BY(mu_);

  std::mutex poll_mu_;  // one poller at a time; others skip
  std::vector<int> scratch_ GUARDED_BY(poll_mu_);
  std::vector<int> done_ GUARDED_BY(poll_mu_);
};

}  // namespace tandem
