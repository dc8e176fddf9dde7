// Internal to kernels/attention (and its tests and benches): DFlash block attention entry
// points that take the kernel family explicitly (DFlashPath, dflash_plan.h), so the SIMT,
// mma.sync and wgmma kernels can be compared. The public DFlashAttentionForward / Backward are
// these with DFlashPath::kAuto.
// Thread-safety: reentrant; they only enqueue work on `stream`.
#pragma once

#include <cstdint>

#include "kernels/attention/attention.h"
#include "kernels/attention/dflash_plan.h"

namespace tandem::kernels::attention_internal {

Status DFlashAttentionForwardPath(DFlashPath path, const DFlashAttentionInputs& in,
                                  const DFlashAttentionConfig& cfg, TensorView out, TensorView lse,
                                  Stream stream);
Status DFlashAttentionBackwardPath(DFlashPath path, const DFlashAttentionInputs& in,
                                   const DFlashAttentionConfig& cfg, const TensorView& out,
                                   const TensorView& lse, const TensorView& d_out,
                                   const DFlashAttentionGrads& grads, Stream stream);

}  // namespace tandem::kernels::attention_internal
