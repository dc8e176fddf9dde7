// Private to the DFlash drafter's .cc files: the saved activations of one layer, the
// workspace carver and small wrappers over the kernels (device dispatch of the block
// attention, linear layers as GEMMs). Thread-safety: as DFlashDrafter.
#pragma once

#include <cstdint>

#include "kernels/attention/attention.h"
#include "kernels/gemm/gemm.h"
#include "kernels/core/tensor.h"
#include "models/dflash/dflash_config.h"
#include "runtime/core/status.h"

namespace tandem::models {

// Saved for the backward; R rows of blocks, Tmax context tokens (narrowed per step). What is
// cheap to recompute is not saved: the normed inputs xn and h1n (from x and h1 with the saved
// rstd) and the SwiGLU output (from gu); the backward rebuilds them into shared scratch. The
// normed and rotated q, k and context k are saved (recomputing them cost 0.6 ms a step in the
// backward at the 8B shape; keeping them costs 0.47 GiB).
struct DFlashLayerActs {
  kernels::TensorView rstd1;                  // f32 [R]
  kernels::TensorView q_pre, q_rstd;          // bf16 [R, hq, d], f32 [R*hq]
  kernels::TensorView k_pre, k_rstd, v;       // bf16 [R, hk, d], f32 [R*hk], bf16 [R, hk, d]
  kernels::TensorView kc_pre, kc_rstd, vc;    // bf16 [Tmax, hk, d], f32 [Tmax*hk], bf16
  // rope(norm(q / k / kc)): the attention's inputs, kept for its backward (recomputing them
  // there cost ~0.9 ms a step at the 8B shape; keeping them, 96 MiB a layer).
  kernels::TensorView q_s, k_s, kc_s;         // bf16 [R, hq, d], [R, hk, d], [Tmax, hk, d]
  kernels::TensorView attn, lse;              // bf16 [R, hq, d], f32 [R, hq]
  kernels::TensorView h1, rstd2;              // bf16 [R, H], f32 [R]
  kernels::TensorView gu;                     // bf16 [R, 2I]
  // DFlash2 only (dflash2_layer.cc): each branch's dynamic conv weights u . W^T (both sides),
  // the prepare conv's output (the branch input) and the branch output (the finish conv's
  // input). Attention: u = xn, output = o_proj's; MLP: u = h1n, output = down_proj's.
  kernels::TensorView dyn_attn, y_attn, o_attn;  // bf16 [R, 2*K*G], [R, H], [R, H]
  kernels::TensorView dyn_mlp, y_mlp, m_out;     // bf16 [R, 2*K*G], [R, H], [R, H]
};

// Hands out 256-byte aligned views of one buffer; with a null base it only measures.
class WorkspaceCarver {
 public:
  WorkspaceCarver(char* base, kernels::Device device) : base_(base), device_(device) {}
  kernels::TensorView Take(kernels::DType dtype, kernels::Shape shape) {
    offset_ = (offset_ + 255) / 256 * 256;
    void* p = base_ ? base_ + offset_ : nullptr;
    offset_ += shape.numel() * kernels::DTypeSize(dtype);
    return kernels::TensorView(p, dtype, shape, device_);
  }
  int64_t used() const { return (offset_ + 255) / 256 * 256; }

 private:
  char* base_;
  kernels::Device device_;
  int64_t offset_ = 0;
};

// The block attention on the views' device (the kernels name CPU and CUDA versions apart).
Status DFlashAttentionFwd(const kernels::DFlashAttentionInputs& in,
                          const kernels::DFlashAttentionConfig& cfg, kernels::TensorView out,
                          kernels::TensorView lse, kernels::Stream s);
Status DFlashAttentionBwd(const kernels::DFlashAttentionInputs& in,
                          const kernels::DFlashAttentionConfig& cfg,
                          const kernels::TensorView& out, const kernels::TensorView& lse,
                          const kernels::TensorView& d_out,
                          const kernels::DFlashAttentionGrads& grads, kernels::Stream s);

// y [rows, out] = x [rows, in] W^T, W [out, in]. Views of any shape are flattened to 2-D.
Status LinearForward(kernels::GemmContext* ctx, const kernels::TensorView& x,
                     const kernels::TensorView& w, const kernels::TensorView& y,
                     kernels::Stream s);
// dW [out, in] (f32) = dy^T x (+ dW when accumulate: the second contribution to a matrix
// whose first one was written with accumulate = false).
Status LinearWeightGrad(kernels::GemmContext* ctx, const kernels::TensorView& dy,
                        const kernels::TensorView& x, const kernels::TensorView& dw,
                        bool accumulate, kernels::Stream s);
// dx [rows, in] = dy W (+ dx when accumulate; dx f32 to accumulate without rounding).
Status LinearInputGrad(kernels::GemmContext* ctx, const kernels::TensorView& dy,
                       const kernels::TensorView& w, const kernels::TensorView& dx,
                       bool accumulate, kernels::Stream s);

// Attention mask of layer l: sliding layers see a window of `sliding_window` positions per
// query slot, its own included (the serving rule, kernels/attention/attention.h), full
// layers the whole document prefix; inside the block causal or not by DFlashLayerCausal
// (without is_causal: sliding layers causal, full layers bidirectional).
kernels::DFlashAttentionConfig DFlashLayerAttention(const DFlashConfig& c, int l);

// The RMSNorm backward workspace for rows of width h, from the flat f32 scratch.
kernels::TensorView RmsWorkspace(const kernels::TensorView& flat, int64_t h);

// InvalidArgument for a DFlash2 config the kernels do not take (taps, group, top-k, rank,
// an input_embedding_scale that is not finite > 0); Ok for DFlash (dflash2_layer.cc).
Status CheckDFlash2Supported(const DFlashConfig& c);

// A view as 2-D [numel / last, last] (REQUIRES contiguous).
kernels::TensorView As2d(const kernels::TensorView& t, int64_t cols);

}  // namespace tandem::models
