#include "actors/dflash/drafter_metrics.h"

#include <utility>

#include <fmt/format.h>

#include "kernels/optim/adamw_types.h"
#include "models/dflash/dflash_metrics.h"
#include "runtime/core/logging.h"

namespace tandem::dflash {

SelectorMetrics SelectorOf(const StepMetrics& m) {
  SelectorMetrics s;
  if (!m.has_selector) return s;
  s.active = true;
  s.loss = m.selector_loss;
  const int64_t covered = m.selector_stats[0], correct = m.selector_stats[1];
  s.recall = m.loss_rows > 0 ? static_cast<double>(covered) / m.loss_rows : 0.0;
  s.accuracy = covered > 0 ? static_cast<double>(correct) / covered : 0.0;
  return s;
}

DrafterMetricsLog::DrafterMetricsLog(JobMetrics* metrics, std::string owner,
                                     int64_t block_size, int64_t total_steps)
    : metrics_(metrics), owner_(std::move(owner)), block_size_(block_size),
      total_steps_(total_steps) {}

void DrafterMetricsLog::SetStep(int64_t step) {
  if (metrics_ != nullptr) metrics_->SetStep(owner_, step, total_steps_);
}

std::string DrafterMetricsLog::Log(int64_t step, const StepMetrics& m, double lr,
                                   double tokens_per_s) {
  const double loss = m.loss;
  if (std::isnan(first_loss_)) first_loss_ = loss;
  last_loss_ = loss;
  const models::BlockAcceptance a = models::BlockAcceptanceStats(
      m.correct.data(), static_cast<int64_t>(m.correct.size()), block_size_);
  const SelectorMetrics sel = SelectorOf(m);
  std::string sel_text;
  if (sel.active)
    sel_text = fmt::format(R"(, "sel_loss": {:.6f}, "cand_recall": {:.4f}, "sel_acc": {:.4f})",
                           sel.loss, sel.recall, sel.accuracy);
  const std::string line = fmt::format(
      R"({{"step": {}, "loss": {:.6f}, "acc": {:.4f}, "tau": {:.3f}, "grad_norm": {:.4f}, "lr": {:.3e}, "tok_s": {:.1f}{}}})",
      step, loss, a.accuracy, a.tau, m.grad_stats[kernels::kGradStatsNorm], lr, tokens_per_s,
      sel_text);
  TLOG_INFO("{}: {}", owner_, line);
  if (metrics_ != nullptr)
    metrics_->Record(owner_, {step, total_steps_, loss, a.accuracy, a.tau,
                              m.grad_stats[kernels::kGradStatsNorm], lr, tokens_per_s, sel});
  return line;
}

}  // namespace tandem::dflash
