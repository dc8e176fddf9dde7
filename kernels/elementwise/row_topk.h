// Row top-k on the device: the candidates of a sampling step with top-k, so that only they
// travel to the host (16 rows of 151936 f32 logits are 9.7 MB; their top 50 are 6.4 KB).
//
//   x: f32 [R, V]   ids: i32 [R, K]   vals: f32 [R, K]   1 <= K <= min(V, kRowTopKMax)
//   row r's K largest entries, ties at the cut going to the smaller index, listed in
//   ascending index order: ids[r, i] the index, vals[r, i] = x[r, ids[r, i]].
//   Entries compare as numbers with -0 == +0; NaN ranks below every number.
//
// Contiguous tensors on one device; R = 0 is a no-op.
// Thread-safety: stateless; ordered on `s`.
#pragma once

#include "kernels/core/tensor.h"

namespace tandem::kernels {

inline constexpr int64_t kRowTopKMax = 1024;

namespace cpu {
Status RowTopK(TensorView ids, TensorView vals, TensorView x, Stream s);
}
namespace cuda {
Status RowTopK(TensorView ids, TensorView vals, TensorView x, Stream s);
}
Status RowTopK(TensorView ids, TensorView vals, TensorView x, Stream s);

namespace internal {
Status CheckRowTopK(const TensorView& ids, const TensorView& vals, const TensorView& x);
// The order both versions rank by: a uint32 that grows with the value (-0 and +0 equal,
// NaN the lowest).
inline uint32_t TopKKey(uint32_t bits) {
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0;  // NaN
  if (bits == 0x80000000u) bits = 0;                 // -0 == +0
  return bits & 0x80000000u ? ~bits : bits | 0x80000000u;
}
}  // namespace internal

}  // namespace tandem::kernels
