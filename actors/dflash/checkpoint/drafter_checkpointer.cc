#include "actors/dflash/checkpoint/drafter_checkpointer.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "actors/dflash/checkpoint/checkpoint_resume.h"
#include "actors/dflash/checkpoint/checkpoint_retention.h"
#include "models/dflash/dflash_checkpoint.h"
#include "runtime/core/clock.h"
#include "runtime/core/logging.h"

namespace tandem::dflash {
namespace {

// Bytes of the regular files directly in `dir`.
uint64_t FileBytes(const std::string& dir) {
  uint64_t n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code size_ec;
    if (e.is_regular_file(size_ec)) n += e.file_size(size_ec);
  }
  return n;
}

// The digests the writer computed, by file name (CommitState's `written`).
std::map<std::string, FileDigest> Digests(const std::vector<models::WrittenFile>& files) {
  std::map<std::string, FileDigest> out;
  for (const models::WrittenFile& f : files)
    out[std::filesystem::path(f.path).filename().string()] = {f.bytes, f.xxh3};
  return out;
}

}  // namespace

DrafterCheckpointer::DrafterCheckpointer(CheckpointerOptions options, ProfileStats* profile)
    : o_(std::move(options)),
      snapshot_stage_(profile->Stage("drafter.checkpoint.snapshot")),
      write_stage_(profile->Stage("drafter.checkpoint.write")),
      wait_stage_(profile->Stage("drafter.checkpoint.wait")) {}

DrafterCheckpointer::~DrafterCheckpointer() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      shutdown_ = true;
      loop_waiting_ = true;
    }
    cv_.notify_all();
    thread_.join();
    std::lock_guard<std::mutex> lock(mu_);
    if (!write_status_.ok())
      TLOG_WARN("{}: a checkpoint write failed while the drafter stopped: {}", o_.owner,
                write_status_.ToString());
  }
  if (retain_thread_.joinable()) {  // after the write: it may have asked for a removal
    {
      std::lock_guard<std::mutex> lock(mu_);
      retain_stop_ = true;
    }
    cv_.notify_all();
    retain_thread_.join();  // finishes a pending removal first
  }
}

void DrafterCheckpointer::RetainLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return retain_pending_ || retain_stop_; });
    if (!retain_pending_) return;
    retain_pending_ = false;
    retain_running_ = true;
    HoldRemovalIfAsked(lock);
    lock.unlock();
    Retain();
    lock.lock();
    retain_running_ = false;
    cv_.notify_all();
  }
}

void DrafterCheckpointer::HoldRemovalIfAsked(std::unique_lock<std::mutex>& lock) {
  if (!o_.test_hold_removal) return;
  const int64_t written = stats_.written;
  cv_.wait(lock, [&] { return stats_.written > written || retain_flush_ || retain_stop_; });
  if (stats_.written > written)
    std::ofstream(o_.dir + "/REMOVAL_OVERLAPPED_BY_TEST") << "committed " << stats_.written
                                                          << " checkpoints\n";
}

void DrafterCheckpointer::WaitForRetention() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !retain_pending_ && !retain_running_; });
}

Result<ResumeState> DrafterCheckpointer::Open(models::DFlashTrainer& trainer, ResumeMode mode,
                                              bool restarted, const RunIdentity& identity,
                                              const models::DFlashConfig& config) {
  ResumeState state;
  state.identity = identity;
  ASSIGN_OR_RETURN(std::optional<ResumePoint> point,
                   OpenCheckpointDir(o_.dir, mode, restarted, o_.writer, identity, config,
                                     o_.owner));
  if (point) {
    models::DFlashTrainerState ts;
    RETURN_IF_ERROR(models::LoadDFlashCheckpoint(point->state.path, trainer.drafter(), &ts));
    if (ts.step != point->state.step)
      return DataLossError("{}: trainer_state.json says step {}, tandem_state.json step {}",
                           point->state.path, ts.step, point->state.step);
    trainer.Restore(ts);
    state = std::move(point->state);
    state.identity = identity;
    saved_step_ = state.step;
  }
  if (enabled() && o_.async) {
    models::DFlashDrafter& d = trainer.drafter();
    config_ = d.config();
    layout_ = d.params().layout;
    const uint64_t need = static_cast<uint64_t>(models::DFlashHostState::Bytes(layout_));
    if (need > o_.pinned_budget)
      return InvalidArgumentError(
          "{}: asynchronous checkpoints snapshot the drafter's state into {} of pinned host "
          "memory, but the group's pinned_bytes is {}; set pinned_bytes >= {} in its "
          "[actors.*] section or leave it out (then it is sized from the drafter; the job's "
          "resource check counts it against the node), or checkpoint.async = false to write "
          "synchronously",
          o_.owner, FormatBytes(need), FormatBytes(o_.pinned_budget), need);
    ASSIGN_OR_RETURN(snapshot_, CheckpointSnapshot::Create(layout_, d.device()));
    if (o_.keep_last > 0) retain_thread_ = std::thread([this] { RetainLoop(); });
  }
  return state;
}

Status DrafterCheckpointer::Save(ResumeState& state, DrafterDevice& dev,
                                 models::DFlashTrainer& trainer) {
  if (!enabled() || state.step == saved_step_) return Status::Ok();
  const int64_t t0 = NowNanos();
  Status s = SaveNow(state, dev, trainer);
  if (!at_end_) stall_max_s_ = std::max(stall_max_s_, (NowNanos() - t0) * 1e-9);
  return s;
}

Status DrafterCheckpointer::SaveNow(ResumeState& state, DrafterDevice& dev,
                                    models::DFlashTrainer& trainer) {
  RETURN_IF_ERROR(WaitForWrite());  // at most one checkpoint in flight
  const std::optional<BestCheckpoint> best = TakeBest(state.step);
  state.path = fmt::format("{}/{}", o_.dir, StepDirName(state.step));
  RETURN_IF_ERROR(CheckStepDirIsNew(state.path));
  if (!o_.async) {
    ScopedTimer wait(wait_stage_);
    ScopedTimer write(write_stage_);
    RETURN_IF_ERROR(dev.Synchronize());
    ASSIGN_OR_RETURN(std::vector<models::WrittenFile> files,
                     models::SaveDFlashCheckpoint(state.path, trainer.drafter(),
                                                  trainer.state(), o_.io));
    RETURN_IF_ERROR(CommitState(o_.dir, state, Digests(files)));
    if (best) RETURN_IF_ERROR(WriteBestCheckpoint(o_.dir, *best));
    Retain();
    const double secs = write.Stop() * 1e-9;
    (at_end_ ? wait_end_s_ : wait_s_) += wait.Stop() * 1e-9;
    saved_step_ = state.step;
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.written;
    stats_.write_s += secs;
    stats_.bytes += FileBytes(state.path);
    return Status::Ok();
  }
  RETURN_IF_ERROR(snapshot_->Take(trainer.drafter()));
  saved_step_ = state.step;
  {
    std::lock_guard<std::mutex> lock(mu_);
    loop_step_ = state.step;
    loop_waiting_ = false;
    write_done_ = false;
    write_status_ = Status::Ok();
  }
  thread_ = std::thread([this, st = state, ts = trainer.state(), best] {
    Status s = Write(st, ts, best);
    if (!s.ok())
      s = s.WithContext(fmt::format("checkpoint {} (written in the background)", st.path));
    std::lock_guard<std::mutex> lock(mu_);
    write_status_ = std::move(s);
    write_done_ = true;
  });
  return Status::Ok();
}

std::optional<BestCheckpoint> DrafterCheckpointer::TakeBest(int64_t step) {
  if (!pending_best_ || pending_best_->step != step) return std::nullopt;
  return std::exchange(pending_best_, std::nullopt);
}

Status DrafterCheckpointer::Write(const ResumeState& state,
                                  const models::DFlashTrainerState& ts,
                                  const std::optional<BestCheckpoint>& best) {
  ASSIGN_OR_RETURN(double copy_s, snapshot_->WaitCopied());
  snapshot_stage_.Record(static_cast<int64_t>(copy_s * 1e9));
  HoldIfAsked(state.step);
  ScopedTimer timer(write_stage_);
  const auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::vector<models::WrittenFile> files,
                   models::WriteDFlashCheckpoint(state.path, config_, layout_,
                                                 snapshot_->host(), ts, o_.io));
  const auto t1 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(StallIfAsked(state.path, state.step));
  RETURN_IF_ERROR(CommitState(o_.dir, state, Digests(files)));
  if (best) RETURN_IF_ERROR(WriteBestCheckpoint(o_.dir, *best));
  const double secs = timer.Stop() * 1e-9;
  const uint64_t bytes = FileBytes(state.path);
  // Where one write's time went: the files (disk bandwidth), and `latest` with its fsyncs.
  const double files_s = std::chrono::duration<double>(t1 - t0).count();
  TLOG_INFO("{}: checkpoint step {}: files {} in {:.2f} s ({:.2f} GB/s), commit {:.2f} s",
            o_.owner, state.step, FormatBytes(bytes), files_s,
            files_s > 0 ? bytes / files_s / 1e9 : 0.0, secs - files_s);
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.written;
  stats_.snapshot_s += copy_s;
  stats_.snapshot_max_s = std::max(stats_.snapshot_max_s, copy_s);
  stats_.write_s += secs;
  stats_.bytes += bytes;
  // keep_last's removals run beside the next write slot: removing 15 GB took 4-5 s on the
  // H200 host's ext4 with `discard` (bench/RESULTS.md), which in this thread made every
  // write ~11.5 s against a ~11.4 s cadence, so the loop waited at each checkpoint. (Asked
  // after the commit is counted: a held removal, test_hold_removal, waits for the next.)
  if (retain_thread_.joinable()) retain_pending_ = true;
  cv_.notify_all();
  return Status::Ok();
}

void DrafterCheckpointer::Retain() const {
  const int64_t t0 = NowNanos();
  Result<std::vector<std::string>> removed = ApplyRetention(o_.dir, o_.keep_last);
  if (!removed.ok()) {
    TLOG_WARN("{}: checkpoint.keep_last: {}", o_.owner, removed.status().ToString());
    return;
  }
  for (const std::string& p : *removed)
    TLOG_INFO("{}: removed {} in {:.2f} s (checkpoint.keep_last = {})", o_.owner, p,
              (NowNanos() - t0) * 1e-9, o_.keep_last);
}

void DrafterCheckpointer::HoldIfAsked(int64_t step) {
  if (o_.test_hold_write <= 0) return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] {
    return loop_waiting_ || loop_step_ >= step + o_.test_hold_write;
  });
}

Status DrafterCheckpointer::StallIfAsked(const std::string& path, int64_t step) {
  if (step != o_.test_stall_at) return Status::Ok();
  std::ofstream(path + "/STALLED_BY_TEST") << "DrafterFaults: stall_checkpoint_write_at_step\n";
  TLOG_INFO("{}: {} stalls before its commit (an injected fault)", o_.owner, path);
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] {
    return shutdown_;
  });
  return CancelledError("{}: stalled by an injected fault", path);
}

Status DrafterCheckpointer::BeforeUpdate(kernels::Stream compute) {
  return snapshot_ != nullptr ? snapshot_->BeforeUpdate(compute) : Status::Ok();
}

Status DrafterCheckpointer::Poll(int64_t step) {
  if (!thread_.joinable()) return Status::Ok();
  bool done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    loop_step_ = step;
    done = write_done_;
  }
  cv_.notify_all();
  return done ? WaitForWrite() : Status::Ok();
}

Status DrafterCheckpointer::SaveAndFlush(ResumeState& state, DrafterDevice& dev,
                                         models::DFlashTrainer& trainer) {
  at_end_ = true;
  Status s = Save(state, dev, trainer);
  if (s.ok()) s = Flush();
  at_end_ = false;
  return s;
}

Status DrafterCheckpointer::Flush() {
  Status s = WaitForWrite();
  if (retain_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      retain_flush_ = true;  // ends a held removal (test_hold_removal)
    }
    cv_.notify_all();
    WaitForRetention();
  }
  return s;
}

Status DrafterCheckpointer::WaitForWrite() {
  if (!thread_.joinable()) return Status::Ok();
  {
    std::lock_guard<std::mutex> lock(mu_);
    loop_waiting_ = true;
  }
  cv_.notify_all();
  ScopedTimer wait(wait_stage_);
  thread_.join();
  (at_end_ ? wait_end_s_ : wait_s_) += wait.Stop() * 1e-9;
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(write_status_, Status::Ok());
}

CheckpointStats DrafterCheckpointer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  CheckpointStats s = stats_;
  s.wait_s = wait_s_;
  s.wait_end_s = wait_end_s_;
  s.stall_max_s = stall_max_s_;
  return s;
}

std::string DrafterCheckpointer::Summary() const {
  const CheckpointStats s = stats();
  if (s.written == 0) return "";
  const double gbs = s.write_s > 0 ? s.bytes / s.write_s / 1e9 : 0.0;
  return fmt::format("checkpoints {} ({}): snapshot max {:.3f} s, write {:.2f} s for {} "
                     "({:.2f} GB/s), loop waited {:.3f} s, stall max {:.3f} s; {:.3f} s at "
                     "the end", s.written, o_.async ? "async" : "sync", s.snapshot_max_s,
                     s.write_s, FormatBytes(s.bytes), gbs, s.wait_s, s.stall_max_s,
                     s.wait_end_s);
}

}  // namespace tandem::dflash
