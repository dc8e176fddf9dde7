// DrafterMetricsLog: the drafter's periodic metrics (every `log_every` steps): loss,
// accuracy and tau (models/dflash/dflash_metrics.h) of the last step, grad norm, learning
// rate and tokens/s, and for a DFlash2 drafter its selector's loss, candidate recall and
// accuracy (SelectorOf), logged as one JSON object and recorded in the job's JobMetrics (which
// writes the metrics file, docs/metrics.md). Remembers the first and last loss it saw for
// the run's summary.
//
// Thread-safety: thread-compatible; the drafter's thread only.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "actors/dflash/drafter_device.h"
#include "runtime/job/job_metrics.h"

namespace tandem::dflash {

// The selector's numbers of `m` (inactive without a selector): recall = covered / loss
// rows, accuracy = correct / covered, each 0 when its denominator is.
SelectorMetrics SelectorOf(const StepMetrics& m);

class DrafterMetricsLog {
 public:
  // `metrics` null: log only. `owner` prefixes the log lines and names the actor in metrics.
  DrafterMetricsLog(JobMetrics* metrics, std::string owner, int64_t block_size,
                    int64_t total_steps);

  // Logs `m` (read after step `step`) and returns the line.
  std::string Log(int64_t step, const StepMetrics& m, double lr, double tokens_per_s);
  // The step reached, for progress (every step).
  void SetStep(int64_t step);

  double first_loss() const { return first_loss_; }  // NaN before the first Log
  double last_loss() const { return last_loss_; }

 private:
  JobMetrics* metrics_;
  std::string owner_;
  int64_t block_size_;
  int64_t total_steps_;
  double first_loss_ = NAN, last_loss_ = NAN;
};

}  // namespace tandem::dflash
