// DFlash2's output scaling of the drafter's logits (z-lab/dflash dflash/model.py:
// output_multiplier, then final_logit_softcapping), CPU reference in T = float or double.
//
// Purpose. logits = lm_head(h) * m, then, when a cap is set (> 0),
//   y = cap * tanh(logits / cap) = cap * tanh(x * m / cap)
// for every element x of the LM head's output. The selector (candidate_selector.h) takes its
// top-k from y. cap <= 0 means no cap (the reference applies it only when set and > 0):
// y = x * m.
//
// Contract. n elements, in place allowed (y == x). Backward: dx[i] = dy[i] * dy/dx[i], from
// x, OVERWRITING dx (dx == dy allowed). Thread-safety: pure functions on caller-owned arrays.
#pragma once

#include <cstdint>

namespace tandem::kernels::dflash2 {

template <typename T>
void LogitSoftcapForward(int64_t n, T multiplier, T cap, const T* x, T* y);

template <typename T>
void LogitSoftcapBackward(int64_t n, T multiplier, T cap, const T* x, const T* dy, T* dx);

}  // namespace tandem::kernels::dflash2
