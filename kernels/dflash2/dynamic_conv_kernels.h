// Raw launchers of the dynamic convolution kernels (dynamic_conv.cu, dynamic_conv_bwd.cu),
// called by dynamic_conv_cuda.cc. They return the launch's cudaError_t so the .cu files need
// no Status. Internal to kernels/. Thread-safety: asynchronous on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels::dflash2 {

// Rows one thread block covers (the backward writes one partial dbase [K, H] per such tile;
// DynamicConvBackwardWorkspaceBytes sizes the workspace by it).
inline constexpr int64_t kDynamicConvRowsPerBlock = 64;

// A bf16 [rows, cols] matrix with row stride `ld` (elements).
struct ConvRows {
  void* p;
  int64_t ld;
};

struct ConvArgs {
  int64_t rows;
  int hidden, taps, group, groups, block_size;
  bool vectorized;  // H % 8 == 0 and every row 16-byte aligned
};

// y (+)= Conv(x; base, d). base: bf16 [taps, hidden] contiguous.
cudaError_t LaunchDynamicConvForward(const ConvArgs& a, ConvRows y, ConvRows x, const void* base,
                                     ConvRows d, bool accumulate, Stream s);

// dx = dL/dx, dd = dL/dd (both overwritten), dbase += dL/dbase through `partial`
// (f32 [ceil(rows / kDynamicConvRowsPerBlock), taps, hidden]).
cudaError_t LaunchDynamicConvBackward(const ConvArgs& a, ConvRows dx, float* dbase, ConvRows dd,
                                      ConvRows dy, ConvRows x, const void* base, ConvRows d,
                                      float* partial, Stream s);

}  // namespace tandem::kernels::dflash2
