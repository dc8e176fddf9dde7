// Fused LM head + weighted cross-entropy with an FP8 frozen LM head (lm_head_precision =
// "fp8"): the same contract, outputs and chunking as LmHeadCrossEntropy (lm_head_ce.h), with
// both LM head GEMMs as block-scaled e4m3 GEMMs with fp32 accumulation (kernels/gemm/fp8.h):
//
//   per chunk of rows:
//     x8      = e4m3(hidden[chunk]), one scale per row per 128 columns of H
//     logits  = x8 W8^T                      (bf16 out; W8: W [V, H] in 128x128 blocks)
//     g       = (softmax(logits) - onehot) * w / sum(w)   (in place, bf16, as the bf16 path)
//     g8      = e4m3(g), one scale per row per 128 columns of V ("per-row" scales, refined
//               to the 1x128 groups that cuBLASLt's block-scaled mode pairs with W8's blocks)
//     dhidden = g8 W8t^T                     (W8t: the transpose of W8, [H, V], K-major)
//
// The weight is quantized once (Fp8LmHeadWeights::Quantize: W8 and its transpose, 2 bytes per
// weight in all, the size of the bf16 weight); its values never change, so neither do the
// codes. CPU reference twin: dequantizes both operands of each GEMM to fp32 and accumulates in
// float64, with the device's rounding points (logits and g in bf16, both quantized the same
// way), so the CUDA version can be checked against it on any shape.
//
// The logit transform and top-k as LmHeadCrossEntropy has them (DFlash2's output multiplier,
// soft cap and candidates): z = T(logits) is taken of the bf16 logits of the FP8 GEMM; loss,
// argmax, correct and the top-k are of z; g is multiplied by dz/dlogit in float before its
// bf16 rounding and e4m3 quantization.
//
// CUDA REQUIRES sm_90 (FP8 tensor cores) and H, V multiples of 16 (cuBLASLt FP8); rows may
// be any number (padded to 4 inside). Everything stays on the device: no host sync, no
// allocation (workspace: LmHeadCeFp8WorkspaceBytes). Thread-safety: as LmHeadCrossEntropy.
#pragma once

#include <cstdint>

#include "kernels/core/memory.h"
#include "kernels/gemm/fp8.h"
#include "kernels/loss/lm_head_ce.h"

namespace tandem::kernels {

// Views of a quantized LM head: w [V, H] for the logits and wt [H, V] for d hidden.
struct Fp8LmHead {
  Fp8BlockWeight w;
  Fp8BlockWeight wt;
  int64_t vocab() const { return w.rows(); }
  int64_t hidden() const { return w.cols(); }
};

// Owns the codes and scales of one Fp8LmHead in one allocation. Immutable after Quantize.
class Fp8LmHeadWeights {
 public:
  // Quantizes `weight` (bf16 or f32 [V, H], on alloc's device) on `stream`; the result is
  // ready once the stream reaches this point.
  static Result<Fp8LmHeadWeights> Quantize(const TensorView& weight, Allocator& alloc,
                                           Stream stream);
  Fp8LmHeadWeights() = default;
  Fp8LmHeadWeights(Fp8LmHeadWeights&&) = default;
  Fp8LmHeadWeights& operator=(Fp8LmHeadWeights&&) = default;

  const Fp8LmHead& head() const { return head_; }
  int64_t nbytes() const { return storage_.nbytes(); }

 private:
  Tensor storage_;  // u8
  Fp8LmHead head_;
};

// Bytes of workspace the CUDA version needs (the CPU version takes an empty view).
int64_t LmHeadCeFp8WorkspaceBytes(int64_t rows, int64_t vocab, int64_t hidden,
                                  int64_t chunk_rows);

namespace cpu {
Status LmHeadCrossEntropyFp8(GemmContext* ctx, const TensorView& hidden, const Fp8LmHead& head,
                             const TensorView& targets, const TensorView& row_weights,
                             const LmHeadCeOutputs& out, const TensorView& workspace,
                             int64_t chunk_rows, Stream s,
                             const LmHeadCeTransform& transform = {});
}  // namespace cpu

namespace cuda {
Status LmHeadCrossEntropyFp8(GemmContext* ctx, const TensorView& hidden, const Fp8LmHead& head,
                             const TensorView& targets, const TensorView& row_weights,
                             const LmHeadCeOutputs& out, const TensorView& workspace,
                             int64_t chunk_rows, Stream s,
                             const LmHeadCeTransform& transform = {});
}  // namespace cuda

// Dispatches on hidden's device.
Status LmHeadCrossEntropyFp8(GemmContext* ctx, const TensorView& hidden, const Fp8LmHead& head,
                             const TensorView& targets, const TensorView& row_weights,
                             const LmHeadCeOutputs& out, const TensorView& workspace,
                             int64_t chunk_rows, Stream s,
                             const LmHeadCeTransform& transform = {});

namespace internal {
// Checks shared by both versions (the transform's too); returns R and H (V is head.vocab()).
Status CheckLmHeadCeFp8Args(const char* op, const TensorView& hidden, const Fp8LmHead& head,
                            const TensorView& targets, const TensorView& row_weights,
                            const LmHeadCeOutputs& out, int64_t chunk_rows,
                            const LmHeadCeTransform& transform, int64_t* rows,
                            int64_t* hidden_dim);
}  // namespace internal

}  // namespace tandem::kernels
