// Internal to kernels/attention (and its tests and benches): DFlash block attention entry
// points that pick the kernel family explicitly, so the SIMT and MMA paths can be compared.
// The public DFlashAttentionForward / Backward are these with DFlashPath::kAuto.
// Thread-safety: reentrant; they only enqueue work on `stream`.
#pragma once

#include <cstdint>

#include "kernels/attention/attention.h"

namespace tandem::kernels::attention_internal {

// Which kernel family the checked entry points use. kAuto: MMA where supported, else SIMT.
// kMma on an unsupported shape is an InvalidArgument error.
enum class DFlashPath : uint8_t { kAuto, kSimt, kMma };

Status DFlashAttentionForwardPath(DFlashPath path, const DFlashAttentionInputs& in,
                                  const DFlashAttentionConfig& cfg, TensorView out, TensorView lse,
                                  Stream stream);
Status DFlashAttentionBackwardPath(DFlashPath path, const DFlashAttentionInputs& in,
                                   const DFlashAttentionConfig& cfg, const TensorView& out,
                                   const TensorView& lse, const TensorView& d_out,
                                   const DFlashAttentionGrads& grads, Stream stream);

}  // namespace tandem::kernels::attention_internal
