#include "actors/dflash/drafter_metrics.h"

#include <utility>

#include <fmt/format.h>

#include "kernels/optim/adamw_types.h"
#include "models/dflash/dflash_metrics.h"
#include "runtime/core/logging.h"

namespace tandem::dflash {

DrafterMetricsLog::DrafterMetricsLog(const std::string& file, std::string owner,
                                     int64_t block_size)
    : owner_(std::move(owner)), block_size_(block_size) {
  if (!file.empty()) file_.open(file, std::ios::app);
}

std::string DrafterMetricsLog::Log(int64_t step, const StepMetrics& m, double lr,
                                   double tokens_per_s) {
  const double loss = m.loss;
  if (std::isnan(first_loss_)) first_loss_ = loss;
  last_loss_ = loss;
  const models::BlockAcceptance a = models::BlockAcceptanceStats(
      m.correct.data(), static_cast<int64_t>(m.correct.size()), block_size_);
  const std::string line = fmt::format(
      R"({{"step": {}, "loss": {:.6f}, "acc": {:.4f}, "tau": {:.3f}, "grad_norm": {:.4f}, "lr": {:.3e}, "tok_s": {:.1f}}})",
      step, loss, a.accuracy, a.tau, m.grad_stats[kernels::kGradStatsNorm], lr, tokens_per_s);
  TLOG_INFO("{}: {}", owner_, line);
  if (file_.is_open()) file_ << line << "\n" << std::flush;
  return line;
}

}  // namespace tandem::dflash
