// DFlash drafter: the optimizer step, serial or overlapped with the next forward (see
// OptimizerStep in dflash_drafter.h).
//
// Why the overlap is exact: the global grad norm (and so the clip scale and the non-finite
// flag) is complete before any update starts, on stream_, exactly as in the serial order;
// the update itself is elementwise, so cutting [0, total) into more launches changes no
// element's arithmetic (every range starts at a multiple of kDFlashParamAlign elements, so
// the kernel takes its float4 path on the same elements as before). What changes is only
// when each group runs: after the grad norm, and before the next forward reads it.
//
// Ordering with the overlap on (S = stream_, O = opt_stream_):
//   S: backward -> grad norm -> record grads_ready_
//   O: wait grads_ready_ -> group 0 -> record updated_[0] -> layer 0 -> record updated_[1]
//      -> ... -> step += 1 -> record opt_done_
//   S (next step): plan, context noise -> wait updated_[0] -> fc ... -> wait updated_[1+l]
//      -> layer l ... -> LM head -> wait opt_done_ -> backward (writes the grads O read).
// The next grad norm overwrites grad_stats_ (read by O) only after that last wait.
#include <span>
#include <utility>
#include <vector>

#include "kernels/optim/adamw.h"
#include "models/dflash/dflash_drafter.h"
#include "models/dflash/dflash_drafter_internal.h"  // DFlashLayerActs, for the destructor
#include "runtime/core/logging.h"

namespace tandem::models {

using kernels::TensorView;

// The buffers go back to the pool in stream_'s order: make stream_ wait for a pending
// update first, so nothing allocated after them can be written by it.
DFlashDrafter::~DFlashDrafter() {
  if (Status st = JoinOptimizer(); !st.ok())
    TLOG_ERROR("DFlash drafter: joining the optimizer stream at destruction: {}", st.ToString());
}

DFlashParams& DFlashDrafter::params() {
  if (Status st = JoinOptimizer(); !st.ok() && join_error_.ok()) join_error_ = std::move(st);
  return params_;
}

Status DFlashDrafter::SetOptimizerOverlap(bool on, int stream_priority) {
  RETURN_IF_ERROR(JoinOptimizer());
  if (on && options_.shared_weights != nullptr)
    return InvalidArgumentError("DFlash drafter: a drafter over shared weights has no optimizer");
  if (on && update_ranges_.empty())
    update_ranges_ = DFlashUpdateRanges(params_.layout, config_.layers.num_hidden_layers);
  if (on && device_.is_cuda()) {
    ASSIGN_OR_RETURN(opt_stream_, kernels::CudaStream::Create(device_.index, /*blocking=*/false,
                                                             stream_priority));
    ASSIGN_OR_RETURN(grads_ready_, kernels::CudaEvent::Create(device_.index));
    ASSIGN_OR_RETURN(opt_done_, kernels::CudaEvent::Create(device_.index));
    updated_.clear();
    for (int g = 0; g <= config_.layers.num_hidden_layers; ++g) {
      ASSIGN_OR_RETURN(kernels::CudaEvent e, kernels::CudaEvent::Create(device_.index));
      updated_.push_back(std::move(e));
    }
  }
  overlap_ = on;
  return Status::Ok();
}

Status DFlashDrafter::JoinOptimizer() {
  if (!update_pending_) return Status::Ok();
  RETURN_IF_ERROR(kernels::StreamWaitEvent(stream_, opt_done_));
  update_pending_ = false;
  return Status::Ok();
}

Status DFlashDrafter::WaitUpdated(int group) {
  if (!update_pending_) return Status::Ok();
  return kernels::StreamWaitEvent(stream_, updated_[group]);
}

Status DFlashDrafter::UpdateRanges(std::span<const DFlashUpdateRange> ranges,
                                   const kernels::AdamWConfig& cfg, kernels::Stream s,
                                   bool record) {
  auto part = [](const TensorView& v, int64_t lo, int64_t hi) { return v.Narrow(0, lo, hi - lo); };
  kernels::AdamWConfig no_decay = cfg;
  no_decay.weight_decay = 0.f;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const DFlashUpdateRange& r = ranges[i];
    RETURN_IF_ERROR(kernels::AdamWUpdate(
        r.weight_decay ? cfg : no_decay, part(params_.master, r.lo, r.hi),
        part(params_.grads, r.lo, r.hi), part(params_.adam_m, r.lo, r.hi),
        part(params_.adam_v, r.lo, r.hi), part(params_.compute, r.lo, r.hi), grad_stats_,
        params_.step, s));
    const bool group_ends = i + 1 == ranges.size() || ranges[i + 1].group != r.group;
    if (record && group_ends) RETURN_IF_ERROR(updated_[r.group].Record(s));
  }
  return Status::Ok();
}

Status DFlashDrafter::OptimizerStep(const kernels::AdamWConfig& cfg, float grad_clip) {
  kernels::NvtxRange range("dflash.adamw");
  if (options_.shared_weights != nullptr)
    return InvalidArgumentError("DFlash drafter: a drafter over shared weights has no optimizer");
  RETURN_IF_ERROR(std::exchange(join_error_, Status::Ok()));
  RETURN_IF_ERROR(JoinOptimizer());  // a step without a forward in between
  RETURN_IF_ERROR(kernels::GradNorm(params_.grads, grad_clip, grad_stats_, norm_workspace_,
                                    stream_));
  if (!overlap_ || !device_.is_cuda()) {
    // Serial: today's two launches (matrices with weight decay, then the norm tail), or on
    // the CPU with the overlap on, the grouped ranges in order.
    const int64_t mc = params_.layout.matrix_count, n = params_.layout.total;
    const DFlashUpdateRange serial[] = {{0, mc, true, 0}, {mc, n, false, 0}};
    RETURN_IF_ERROR(UpdateRanges(overlap_ ? std::span<const DFlashUpdateRange>(update_ranges_)
                                          : std::span<const DFlashUpdateRange>(serial),
                                 cfg, stream_, /*record=*/false));
    RETURN_IF_ERROR(kernels::AdamWFinishStep(grad_stats_, params_.step, stream_));
    return Mark("optimizer");
  }
  const kernels::Stream o = opt_stream_.get();
  RETURN_IF_ERROR(grads_ready_.Record(stream_));
  RETURN_IF_ERROR(opt_stream_.Wait(grads_ready_));
  RETURN_IF_ERROR(UpdateRanges(update_ranges_, cfg, o, /*record=*/true));
  RETURN_IF_ERROR(kernels::AdamWFinishStep(grad_stats_, params_.step, o));
  RETURN_IF_ERROR(opt_done_.Record(o));
  update_pending_ = true;
  return Mark("optimizer.grad_norm");
}

}  // namespace tandem::models
