// Rotary position embedding (RoPE), forward and backward, in the two-halves layout of
// Qwen/Llama (HF `rotate_half`), with per-token positions and partial rotation.
//
//   x: bf16 [T, heads, head_dim]   pos: i32 [T]   out: bf16 [T, heads, head_dim]
//   r = rotary_dim (even, <= head_dim), half = r / 2, inv_freq[i] = theta^(-2i / r)
//   a = pos[t] * inv_freq[i] (fp32, as HF), for i < half:
//     out[.., i]        = x[.., i] * cos(a) - x[.., i + half] * sin(a)
//     out[.., i + half] = x[.., i + half] * cos(a) + x[.., i] * sin(a)
//   dims r .. head_dim-1 pass through unchanged (partial RoPE, e.g. Qwen3.5/3.6 hybrids).
//   Backward is the transpose, i.e. the rotation by -a: dx = R(-a) dout.
//
// Math in fp32 with one rounding at the output (HF rounds cos/sin to bf16 first; the
// difference is about one bf16 ulp). out may alias x (in place). Contiguous tensors on one
// device. Thread-safety: stateless; ordered on `s`.
#pragma once

#include "kernels/core/tensor.h"

namespace tandem::kernels {

struct RopeConfig {
  int64_t rotary_dim = 0;  // 0 means head_dim (full rotation)
  double theta = 1e6;      // rope_theta (Qwen3: 1e6)
};

// Largest rotary_dim the CUDA kernel takes (its frequency table travels as a kernel argument).
constexpr int64_t kRopeMaxRotaryDim = 512;

// inv_freq: [rotary_dim / 2] <- theta^(-2i / rotary_dim), rounded from float64 to fp32 once;
// the CPU and CUDA versions both use this table.
void RopeInvFreq(int64_t rotary_dim, double theta, float* inv_freq);

namespace cpu {
Status RopeForward(TensorView out, TensorView x, TensorView pos, RopeConfig cfg, Stream s);
Status RopeBackward(TensorView dx, TensorView dout, TensorView pos, RopeConfig cfg, Stream s);
}  // namespace cpu

namespace cuda {
Status RopeForward(TensorView out, TensorView x, TensorView pos, RopeConfig cfg, Stream s);
Status RopeBackward(TensorView dx, TensorView dout, TensorView pos, RopeConfig cfg, Stream s);
}  // namespace cuda

Status RopeForward(TensorView out, TensorView x, TensorView pos, RopeConfig cfg, Stream s);
Status RopeBackward(TensorView dx, TensorView dout, TensorView pos, RopeConfig cfg, Stream s);

namespace internal {
// Shared checks; fills tokens, heads, head_dim and the effective rotary_dim.
struct RopeDims {
  int64_t tokens, heads, head_dim, rotary_dim;
};
Status CheckRope(const char* op, const TensorView& out, const TensorView& x, const TensorView& pos,
                 const RopeConfig& cfg, RopeDims* dims);
}  // namespace internal

}  // namespace tandem::kernels
