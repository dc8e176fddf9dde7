// DrafterMetricsLog: the drafter's periodic metrics line (every `log_every` steps): loss,
// accuracy and tau (models/dflash/dflash_metrics.h) of the last step, grad norm, learning
// rate and tokens/s, as one JSON object logged and, with `metrics_file`, appended to that
// file (JSON lines). Remembers the first and last loss it saw for the run's summary.
//
// Thread-safety: thread-compatible; the drafter's thread only.
#pragma once

#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>

#include "actors/dflash/drafter_device.h"

namespace tandem::dflash {

class DrafterMetricsLog {
 public:
  // `file` "" logs only. `owner` prefixes the log lines.
  DrafterMetricsLog(const std::string& file, std::string owner, int64_t block_size);

  // Logs `m` (read after step `step`) and returns the line.
  std::string Log(int64_t step, const StepMetrics& m, double lr, double tokens_per_s);

  double first_loss() const { return first_loss_; }  // NaN before the first Log
  double last_loss() const { return last_loss_; }

 private:
  std::ofstream file_;
  std::string owner_;
  int64_t block_size_;
  double first_loss_ = NAN, last_loss_ = NAN;
};

}  // namespace tandem::dflash
