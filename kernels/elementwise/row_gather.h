// Row gather of any dtype, with zero rows for invalid indices: the gather and the zero-padded
// scatter-back of a row subset (e.g. the drafter's LM head runs only on rows with loss
// weight, then puts d(hidden) and the per-row correctness back at their full-size rows).
//
//   rows: i32 [N]   table: [M, ...]   out: [N, ...] (same dtype and row shape as table)
//   out[n] = table[rows[n]] if 0 <= rows[n] < M, else a row of zero bytes.
//
// Data moves as raw bytes (any dtype). Contiguous tensors on one device; N = 0 (with a
// non-empty table) is a no-op. Thread-safety: stateless; ordered on `s`.
#pragma once

#include "kernels/core/tensor.h"

namespace tandem::kernels {

namespace cpu {
Status RowGather(TensorView out, TensorView rows, TensorView table, Stream s);
}
namespace cuda {
Status RowGather(TensorView out, TensorView rows, TensorView table, Stream s);
}
Status RowGather(TensorView out, TensorView rows, TensorView table, Stream s);

namespace internal {
// Checks the arguments; *row_bytes = bytes of one row of out and table.
Status CheckRowGather(const TensorView& out, const TensorView& rows, const TensorView& table,
                      int64_t* row_bytes);
}

}  // namespace tandem::kernels
