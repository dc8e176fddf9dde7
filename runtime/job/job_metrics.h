// JobMetrics: the training numbers a job's actors publish (step of total, loss, accuracy,
// tau, tokens/s), kept for the live status (`tandem status`, the progress line, Prometheus)
// and appended to the job's metrics file together with the runner's periodic samples (store,
// channels, per-stage profile windows). The file is JSON lines with a versioned schema:
// docs/metrics.md. `tandem report` reads it back (tools/report/).
//
// Contract: nothing is written until an actor calls OpenFile (the drafter does, with its
// `metrics_file`, by default CHECKPOINT_DIR/metrics.jsonl); the first call opens the file
// for the whole job, later calls with the same path are no-ops (a restarted actor), another
// path is InvalidArgument. Publishing without a file only updates the live numbers.
//
// Thread-safety: every method may be called from any thread (one mutex).
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/channel/channel_base.h"
#include "runtime/core/clock.h"
#include "runtime/core/status.h"
#include "runtime/core/thread_annotations.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/job_status.h"
#include "runtime/profile/profile_stats.h"
#include "runtime/store/store_stats.h"

namespace tandem {

// The metrics file's schema version: bump it when a record changes meaning.
inline constexpr int kMetricsSchemaVersion = 1;
// How often the runner samples store, channels and profile into the file (seconds).
inline constexpr double kMetricsSampleSeconds = 2.0;

// What a training actor reads from the device every `log_every` steps.
struct TrainPoint {
  int64_t step = 0;
  int64_t total_steps = 0;
  double loss = 0;
  double acc = 0;
  double tau = 0;
  double grad_norm = 0;
  double lr = 0;
  double tok_s = 0;
  SelectorMetrics selector;  // DFlash2 drafters only
};

// What one evaluation by speculative decoding measured (a drafter's `eval` table, every
// eval.every_steps steps); appended as an "eval" record.
struct EvalPoint {
  int64_t step = 0;
  double tau = 0;                   // mean accept length per verify step (bonus included)
  std::vector<double> accept_rate;  // [j - 1]: share of verify steps that accepted draft j
  double tok_s = 0;                 // generated tokens per second of decoding
  int64_t prompts = 0;
  int64_t tokens = 0;               // generated
  int64_t verify_steps = 0;
  double seconds = 0;               // the evaluation's wall time
  int64_t block_size = 0;
  double temperature = 0;
  bool best = false;                // the highest tau of the run so far
  int64_t best_step = -1;
  double best_tau = 0;
};

class JobMetrics {
 public:
  // `job` must outlive this; `start` is time 0 of the file's "t" fields.
  JobMetrics(const JobSpec* job, TimePoint start) : job_(job), start_(start) {}

  // Opens `path` (parent folders created) and writes the header record: schema version,
  // job name, file, start time and every setting of the job. `append` keeps what is there
  // (a resumed run adds a new header). IO errors name the path.
  Status OpenFile(const std::string& path, bool append) EXCLUDES(mu_);
  std::string path() const EXCLUDES(mu_);

  // Cheap, once per step: how far `actor` is.
  void SetStep(const std::string& actor, int64_t step, int64_t total_steps) EXCLUDES(mu_);
  // Every log interval: the numbers read from the device; appended as a "train" record.
  void Record(const std::string& actor, const TrainPoint& p) EXCLUDES(mu_);
  // After each evaluation: appended as an "eval" record, and the live status's eval.
  void RecordEval(const std::string& actor, const EvalPoint& p) EXCLUDES(mu_);
  // The runner's periodic sample ("sample" record): store, channels, and the per-stage time
  // spent since the previous sample, from the profile's cumulative totals.
  void Sample(const StoreStats& store, const std::vector<ChannelStats>& channels,
              const ProfileSnapshot& profile, uint64_t items_done) EXCLUDES(mu_);
  // The last record: how the job ended.
  void End(const std::string& state, const std::string& error) EXCLUDES(mu_);

  // The live training picture over every actor that published (the slowest actor's step,
  // the mean of the latest numbers); training.active is false when none did.
  TrainingStatus Training() const EXCLUDES(mu_);

 private:
  struct ActorProgress {
    int64_t step = 0;
    int64_t total = 0;
    int64_t first_step = -1;     // the first step seen in this process (resume-aware rate)
    TimePoint first_time;
    TimePoint last_time;
    bool has_point = false;
    TrainPoint point;
    bool has_eval = false;
    EvalPoint eval;
  };
  double Now() const { return SecondsSince(start_); }
  void WriteLine(const std::string& line) REQUIRES(mu_);

  const JobSpec* const job_;
  const TimePoint start_;
  mutable std::mutex mu_;
  std::string path_ GUARDED_BY(mu_);
  std::ofstream file_ GUARDED_BY(mu_);
  bool write_failed_ GUARDED_BY(mu_) = false;
  std::map<std::string, ActorProgress> actors_ GUARDED_BY(mu_);
  std::map<std::string, int64_t> last_stage_ns_ GUARDED_BY(mu_);
  double last_sample_t_ GUARDED_BY(mu_) = 0;
};

// Every setting of the job as flat "section.key" -> value text, in file order: what the
// metrics header and the report's settings table show.
std::vector<std::pair<std::string, std::string>> FlattenJobSettings(const JobSpec& job);

}  // namespace tandem
