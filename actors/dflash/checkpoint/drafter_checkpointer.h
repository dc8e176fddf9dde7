// DrafterCheckpointer: where a DrafterActor's checkpoints go and how a run continues from
// them. Saves DIR/step_N (models/dflash/dflash_checkpoint.h) plus its tandem_state.json and
// then points DIR/latest at it (checkpoint_state.h), so `latest` always names a complete,
// durable checkpoint. Only the writer (replica 0 of a data-parallel group) saves; every
// replica resumes from the same point. What to resume from and the checks before trusting it
// (newest complete step when `latest` is missing, file digests, job identity and config,
// resume = "force", never overwriting a step directory) are checkpoint_resume.h's.
//
// Asynchronous checkpoints (the default): Save takes a snapshot of the state into
// host buffers (checkpoint_snapshot.h; pinned on the GPU, where the copy runs on a stream of
// its own while the next step's forward and backward run) and writes the files on a
// background thread while training goes on. At most one checkpoint is in flight: a Save due
// while the previous write still runs waits for it. The snapshot's buffers are allocated once
// at Open and must fit the group's `pinned_bytes`, which the job's resource check counts
// against the node. With async = false, Save copies and writes on the caller's thread.
//
// The files are written by WriteDFlashCheckpoint (parallel chunks, O_DIRECT where possible,
// digests computed while writing, so CommitState reads nothing back). With keep_last > 0,
// older complete steps are removed after `latest` moves (checkpoint_retention.h; a failed
// removal is logged, never the job's error: the checkpoint itself is durable). Async, the
// removals run on a thread of their own, so they do not hold the next checkpoint's slot
// (removing a 15 GB step took 4-5 s on an ext4 mounted with `discard`); Flush and the
// destructor wait for them.
//
// Errors of a background write (a read-only directory, a full disk) come back from the next
// Poll, Save or Flush, naming the path; the destructor waits for an in-flight write (a stop,
// Ctrl-C or an error never leaves a half-written checkpoint behind `latest`; a killed process
// leaves an incomplete step directory that `latest` does not name and checkpoint_cleanup.h
// removes).
//
// Profile stages: drafter.checkpoint.snapshot (copying the state to host memory; on the GPU
// its time on the copy stream, overlapping training), drafter.checkpoint.write (the files,
// fsync and `latest`), drafter.checkpoint.wait (the training loop blocked on a write: the
// previous one still running at the next checkpoint, at the end, on a stop, or the whole
// write with async = false). `tandem status` counts snapshot + wait as checkpointing's hold
// on the loop.
//
// Thread-safety: the public methods are for the drafter's thread only; the background write
// shares only what `mu_` guards.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "actors/dflash/checkpoint/checkpoint_snapshot.h"
#include "actors/dflash/checkpoint/checkpoint_state.h"
#include "actors/dflash/drafter_eval_best.h"
#include "actors/dflash/drafter_device.h"
#include "models/dflash/dflash_config.h"
#include "models/dflash/dflash_trainer.h"
#include "models/io/file_set_writer.h"
#include "runtime/core/status.h"
#include "runtime/core/thread_annotations.h"
#include "runtime/profile/profile_stats.h"

namespace tandem::dflash {

struct CheckpointerOptions {
  std::string dir;             // "" disables saving
  bool writer = true;          // false for replicas other than 0: never write
  std::string owner;           // the actor, in logs and errors
  bool async = true;           // snapshot + background write
  uint64_t pinned_budget = 0;  // the group's pinned_bytes: the snapshot must fit in it
  int64_t keep_last = 0;       // > 0: retention after each commit (checkpoint_retention.h)
  models::FileSetWriteOptions io;  // how the files are written (models/io/file_set_writer.h)
  // Injected faults (DrafterFaults, drafter_faults.h), for tests only.
  // A background write starts only after the loop has taken this many more steps
  // (or waits for the write), so training provably continues past the snapshot.
  int64_t test_hold_write = 0;
  // (async, keep_last > 0): a removal waits until the next checkpoint commits (or
  // Flush, or the destructor), so a commit can only come first if the
  // removals do not hold the write slot; then DIR/REMOVAL_OVERLAPPED_BY_TEST names its step.
  bool test_hold_removal = false;
  // The write of this step stops after its files, before tandem_state.json and
  // `latest`, creates STALLED_BY_TEST in the step directory and waits for the process to be
  // killed (or for the destructor). -1: never.
  int64_t test_stall_at = -1;
};

// What the checkpoints of this run cost (for the summary and benchmarks).
struct CheckpointStats {
  int64_t written = 0;        // checkpoints made durable
  double snapshot_s = 0;      // copies to host memory, total
  double snapshot_max_s = 0;
  double write_s = 0;         // files + fsync + latest, total
  uint64_t bytes = 0;         // bytes of the files written
  double wait_s = 0;          // the loop blocked on writes while training
  double wait_end_s = 0;      // ... at the end of the run or on a stop (SaveAndFlush)
  double stall_max_s = 0;     // the loop's longest hold by one checkpoint while training
};

class DrafterCheckpointer {
 public:
  // `profile` (not null) receives the drafter.checkpoint.* stages.
  DrafterCheckpointer(CheckpointerOptions options, ProfileStats* profile);
  // Waits for an in-flight write (releasing the test hold); a failure nobody read is logged.
  ~DrafterCheckpointer();
  DrafterCheckpointer(const DrafterCheckpointer&) = delete;
  DrafterCheckpointer& operator=(const DrafterCheckpointer&) = delete;

  // Opens DIR for this run (checkpoint_resume.h's OpenCheckpointDir): a fresh run
  // (`mode` kOff, not `restarted`) moves an earlier run's checkpoints aside; otherwise the
  // resume point is verified against `identity` and `config` and loaded into `trainer`,
  // whose trainer_state.json must be at the same step as tandem_state.json (DataLoss).
  // Allocates the snapshot buffers when saving asynchronously (InvalidArgument naming
  // pinned_bytes when they do not fit the budget). Returns the state to continue from
  // (step 0, no positions, when there is none), with `identity` set. Call before the first
  // step.
  Result<ResumeState> Open(models::DFlashTrainer& trainer, ResumeMode mode, bool restarted,
                           const RunIdentity& identity, const models::DFlashConfig& config);

  // Checkpoints the trainer at `state.step`: a no-op when disabled or when this step was
  // already saved or resumed from. Async: waits for the previous write, snapshots, starts
  // the write and returns; sync: writes before returning. Refuses to write into an existing
  // step directory (CheckStepDirIsNew). Updates state.path.
  Status Save(ResumeState& state, DrafterDevice& dev, models::DFlashTrainer& trainer);
  // At the end of a run or on a stop: Save, then Flush. Its waits are not counted as stalls
  // of the training loop (CheckpointStats::stall_max_s), only in wait_end_s.
  Status SaveAndFlush(ResumeState& state, DrafterDevice& dev, models::DFlashTrainer& trainer);
  // Call before every optimizer update, enqueued on `compute` (orders it after a snapshot).
  Status BeforeUpdate(kernels::Stream compute);
  // Call after every step, `step` being the steps done: the error of a finished background
  // write, else Ok (never blocks).
  Status Poll(int64_t step);
  // Waits until every checkpoint saved so far is durable (or its write failed: the error),
  // and keep_last's removals after them are done.
  Status Flush();
  // keep_best (the drafter's eval, drafter_eval.h): the Save of step `best.step` (call it
  // next) also points DIR/best at it, right after `latest` (drafter_eval_best.h), so `best`
  // never names a checkpoint that is not durable.
  void MarkBest(const BestCheckpoint& best) { pending_best_ = best; }

  // True when Save writes files.
  bool enabled() const { return !o_.dir.empty() && o_.writer; }
  const std::string& dir() const { return o_.dir; }
  CheckpointStats stats() const EXCLUDES(mu_);
  // "checkpoints 2 (async): snapshot max 0.267 s, write 31.2 s for 27.4 GiB (0.94 GB/s),
  // loop waited 0.000 s, stall max 0.004 s; 15.3 s at the end"; "" when none was written.
  std::string Summary() const;

 private:
  Status SaveNow(ResumeState& state, DrafterDevice& dev, models::DFlashTrainer& trainer);
  Status WaitForWrite();
  // The background write's body.
  Status Write(const ResumeState& state, const models::DFlashTrainerState& ts,
               const std::optional<BestCheckpoint>& best) EXCLUDES(mu_);
  // The best pointer due with the checkpoint of `step` (MarkBest), taken.
  std::optional<BestCheckpoint> TakeBest(int64_t step);
  // The test hooks, on the writer's thread.
  void HoldIfAsked(int64_t step) EXCLUDES(mu_);
  Status StallIfAsked(const std::string& path, int64_t step) EXCLUDES(mu_);
  // After a commit: keep_last (logged; on the writer's thread when sync, else on
  // retain_thread_, which RetainLoop runs until the destructor).
  void Retain() const;
  void RetainLoop() EXCLUDES(mu_);
  void WaitForRetention() EXCLUDES(mu_);  // no removal pending or running
  // The test_hold_removal hook, on retain_thread_ with mu_ held by `lock`.
  void HoldRemovalIfAsked(std::unique_lock<std::mutex>& lock) REQUIRES(mu_);

  const CheckpointerOptions o_;
  StageHandle snapshot_stage_, write_stage_, wait_stage_;
  int64_t saved_step_ = -1;  // the step last snapshotted / written or resumed from
  std::unique_ptr<CheckpointSnapshot> snapshot_;  // async only
  models::DFlashConfig config_;                   // the drafter's, for config.json
  models::DFlashParamLayout layout_;
  std::thread thread_;   // the in-flight write, if joinable
  std::thread retain_thread_;  // async with keep_last > 0: runs RetainLoop
  double wait_s_ = 0, wait_end_s_ = 0, stall_max_s_ = 0;
  bool at_end_ = false;  // inside SaveAndFlush: waits count as wait_end_s_
  std::optional<BestCheckpoint> pending_best_;  // MarkBest's, until its step is saved

  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t loop_step_ GUARDED_BY(mu_) = 0;
  bool loop_waiting_ GUARDED_BY(mu_) = false;  // the loop waits for the write (ends a hold)
  bool shutdown_ GUARDED_BY(mu_) = false;      // the destructor runs (ends a stall)
  bool write_done_ GUARDED_BY(mu_) = false;
  bool retain_pending_ GUARDED_BY(mu_) = false;  // a commit asked for keep_last's removals
  bool retain_running_ GUARDED_BY(mu_) = false;
  bool retain_stop_ GUARDED_BY(mu_) = false;     // the destructor runs
  bool retain_flush_ GUARDED_BY(mu_) = false;    // Flush waits for the removals
  Status write_status_ GUARDED_BY(mu_);
  CheckpointStats stats_ GUARDED_BY(mu_);
};

}  // namespace tandem::dflash
