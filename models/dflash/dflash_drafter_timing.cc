// DFlash drafter: opt-in per-stage GPU timing. Each Mark records one of a fixed pool of
// timing events on the drafter's stream (no allocation, no host sync in a step); StageTimes
// waits for the last one and turns consecutive marks into stage durations.
#include <vector>

#include "models/dflash/dflash_drafter.h"

namespace tandem::models {

Status DFlashDrafter::EnableStageTiming() {
  if (!device_.is_cuda())
    return InvalidArgumentError("DFlash drafter: stage timing needs a CUDA device");
  const size_t n = 16 + 8 * static_cast<size_t>(config_.layers.num_hidden_layers);
  std::vector<kernels::CudaEvent> events;
  for (size_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(kernels::CudaEvent e, kernels::CudaEvent::Create(device_.index, true));
    events.push_back(std::move(e));
  }
  marks_ = std::move(events);
  mark_names_.assign(n, {nullptr, -1});
  num_marks_ = 0;
  return Status::Ok();
}

Status DFlashDrafter::Mark(const char* stage, int layer) {
  if (marks_.empty()) return Status::Ok();
  if (num_marks_ == marks_.size())
    return InternalError("DFlash drafter: more than {} timing marks in one step", marks_.size());
  mark_names_[num_marks_] = {stage, layer};
  return marks_[num_marks_++].Record(stream_);
}

Result<std::vector<DFlashStageTime>> DFlashDrafter::StageTimes() const {
  if (num_marks_ < 2)
    return InvalidArgumentError("DFlash drafter: no timed step (EnableStageTiming, then a step)");
  RETURN_IF_ERROR(marks_[num_marks_ - 1].Synchronize());
  std::vector<DFlashStageTime> out;
  for (size_t i = 1; i < num_marks_; ++i) {
    ASSIGN_OR_RETURN(float ms, marks_[i].ElapsedMsSince(marks_[i - 1]));
    out.push_back({mark_names_[i].first, mark_names_[i].second, ms});
  }
  return out;
}

}  // namespace tandem::models
