// Row argmax on the device: the greedy pick of a decode step without copying the logits to
// the host (a verify block of 16 rows over a 151936-token vocabulary is 9.7 MB of f32).
//
//   x: f32 or bf16 [R, V]   out: i32 [R]
//   out[r] = the smallest j with x[r, j] == max_j x[r, j]  (the first maximum, as
//            std::max_element), NaN entries skipped; a row of only NaN gives 0.
//
// Contiguous tensors on one device; R = 0 is a no-op; V must be >= 1.
// Thread-safety: stateless; ordered on `s`.
#pragma once

#include "kernels/core/tensor.h"

namespace tandem::kernels {

namespace cpu {
Status RowArgmax(TensorView out, TensorView x, Stream s);
}
namespace cuda {
Status RowArgmax(TensorView out, TensorView x, Stream s);
}
Status RowArgmax(TensorView out, TensorView x, Stream s);

namespace internal {
Status CheckRowArgmax(const TensorView& out, const TensorView& x);
}

}  // namespace tandem::kernels
