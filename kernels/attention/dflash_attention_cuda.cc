// Checked entry points of the DFlash block attention on CUDA: argument checks, the plan of
// kernels for the shape and device (SelectDFlashPlan, dflash_plan.h), their shared-memory
// budget, then the launches: wgmma (dflash_wgmma_*.cu), mma.sync (dflash_mma*.cu) or SIMT
// (dflash_attention.cu).
#include "kernels/attention/attention.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "kernels/attention/dflash_internal.h"
#include "kernels/attention/dflash_mma_internal.h"
#include "kernels/attention/dflash_path.h"
#include "kernels/attention/dflash_wgmma_internal.h"
#include "kernels/core/cuda_check.h"
#include "kernels/core/device_props.h"

namespace tandem::kernels {
namespace {

using attention_internal::DFlashCtxSmemBytes;
using attention_internal::DFlashKernel;
using attention_internal::DFlashMmaSmemBytes;
using attention_internal::DFlashMmaSupported;
using attention_internal::DFlashPath;
using attention_internal::DFlashPlan;
using attention_internal::DFlashWgmmaForwardSmemBytes;
using attention_internal::DFlashWgmmaQuerySmemBytes;
using attention_internal::kTileKeys;
using attention_internal::kTileStride;
using attention_internal::LaunchDFlashKernel;
using attention_internal::LaunchDFlashMmaBackward;
using attention_internal::LaunchDFlashMmaForward;
using attention_internal::LaunchDFlashWgmmaForward;
using Params = attention_internal::DFlashKernelParams;
static_assert(attention_internal::kBlock == kDFlashBlockSize);

// Launch shape: lanes per row and dims per lane. TPR >= 256 / rows keeps >= 256 threads;
// DS <= 32 keeps the per-lane slices in registers.
struct Launch {
  int tpr = 0, ds = 0, threads = 0;
};
Result<Launch> PlanLaunch(const char* op, const DFlashDims& dims) {
  if (dims.d != 64 && dims.d != 128 && dims.d != 256)
    return InvalidArgumentError("{}: head_dim {} not supported (64, 128 or 256)", op, dims.d);
  const int rows = kDFlashBlockSize * static_cast<int>(dims.hq / dims.hk);
  Launch l;
  l.tpr = std::max(256 / rows, static_cast<int>(dims.d) / 32);
  int pow2 = 1;
  while (pow2 < l.tpr) pow2 *= 2;
  l.tpr = pow2;
  if (l.tpr > 32 || rows * l.tpr > 1024)
    return InvalidArgumentError("{}: GQA group {} with head_dim {} not supported", op,
                                dims.hq / dims.hk, dims.d);
  l.ds = static_cast<int>(dims.d) / l.tpr;
  l.threads = rows * l.tpr;
  return l;
}

Status CheckDevice(const char* op, const DFlashAttentionInputs& in) {
  const TensorView* all[] = {&in.q_blk, &in.k_blk, &in.v_blk, &in.k_ctx, &in.v_ctx,
                             &in.anchors, &in.doc_start};
  for (const TensorView* t : all) {
    if (!t->device().is_cuda()) return InvalidArgumentError("{}: {} is not on a CUDA device", op, t->ToString());
    if (reinterpret_cast<uintptr_t>(t->data()) % 16 != 0)
      return InvalidArgumentError("{}: {} is not 16-byte aligned", op, t->ToString());
  }
  return Status::Ok();
}

Params MakeParams(const DFlashAttentionInputs& in, const DFlashAttentionConfig& cfg,
                  const DFlashDims& dims) {
  Params p{};
  p.q = in.q_blk.data();
  p.kb = in.k_blk.data();
  p.vb = in.v_blk.data();
  p.kc = in.k_ctx.data();
  p.vc = in.v_ctx.data();
  p.anchors = in.anchors.data_as<const int32_t>();
  p.doc_start = in.doc_start.data_as<const int32_t>();
  p.nb = static_cast<int>(dims.nb);
  p.t = static_cast<int>(dims.t);
  p.hq = static_cast<int>(dims.hq);
  p.hk = static_cast<int>(dims.hk);
  p.d = static_cast<int>(dims.d);
  p.window = std::max(cfg.window, 0);
  p.causal = cfg.causal_in_block;
  p.scale = cfg.scale != 0.0f ? cfg.scale : 1.0f / std::sqrt(static_cast<float>(dims.d));
  return p;
}

Status CheckSmem(const char* op, size_t smem) {
  int dev = 0, limit = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&dev));
  CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  if (smem > static_cast<size_t>(limit))
    return InvalidArgumentError("{}: needs {} bytes of shared memory, the device has {}", op, smem,
                                limit);
  return Status::Ok();
}

// The kernels of this call: the tensor-core kernels need a supported (group, head_dim) and
// 16-byte aligned outputs (cp.async of dO, float4 atomics); an error when `path` demands them
// and they do not apply.
Result<DFlashPlan> PlanKernels(const char* op, DFlashPath path, const DFlashDims& dims, float scale,
                               std::initializer_list<const TensorView*> outputs) {
  bool aligned = true;
  for (const TensorView* t : outputs)
    aligned = aligned && reinterpret_cast<uintptr_t>(t->data()) % 16 == 0;
  const bool ok = DFlashMmaSupported(dims.hq / dims.hk, dims.d) && aligned;
  if ((path == DFlashPath::kMma || path == DFlashPath::kMmaSync) && !ok)
    return InvalidArgumentError("{}: no MMA kernel for GQA group {}, head_dim {}{}", op,
                                dims.hq / dims.hk, dims.d, aligned ? "" : ", unaligned outputs");
  return attention_internal::SelectDFlashPlan(path, ok, dims.hq / dims.hk, dims.d, scale,
                                              CurrentDeviceComputeCapabilityMajor());
}

}  // namespace

namespace attention_internal {

Status DFlashAttentionForwardPath(DFlashPath path, const DFlashAttentionInputs& in,
                                  const DFlashAttentionConfig& cfg, TensorView out,
                                  TensorView lse, Stream stream) {
  constexpr const char* kOp = "DFlashAttentionForward";
  ASSIGN_OR_RETURN(DFlashDims dims, CheckDFlashInputs(kOp, in));
  RETURN_IF_ERROR(CheckDevice(kOp, in));
  const int64_t rows = dims.nb * kDFlashBlockSize;
  RETURN_IF_ERROR(ExpectDType(kOp, "out", out, DType::kBF16));
  RETURN_IF_ERROR(ExpectShape(kOp, "out", out, Shape{rows, dims.hq, dims.d}));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "out", out));
  RETURN_IF_ERROR(ExpectDType(kOp, "lse", lse, DType::kF32));
  RETURN_IF_ERROR(ExpectShape(kOp, "lse", lse, Shape{rows, dims.hq}));
  RETURN_IF_ERROR(ExpectContiguous(kOp, "lse", lse));
  if (dims.nb == 0) return Status::Ok();
  Params p = MakeParams(in, cfg, dims);
  p.out = out.data();
  p.lse = lse.data_as<float>();
  ASSIGN_OR_RETURN(const DFlashPlan plan, PlanKernels(kOp, path, dims, p.scale, {&out}));
  if (plan.forward == DFlashKernel::kWgmma) {
    RETURN_IF_ERROR(CheckSmem(kOp, DFlashWgmmaForwardSmemBytes(dims.d)));
    CUDA_RETURN_IF_ERROR(LaunchDFlashWgmmaForward(p, stream));
    return Status::Ok();
  }
  if (plan.forward == DFlashKernel::kMmaSync) {
    RETURN_IF_ERROR(CheckSmem(kOp, DFlashMmaSmemBytes(false, dims.hq / dims.hk, dims.d)));
    CUDA_RETURN_IF_ERROR(LaunchDFlashMmaForward(p, stream));
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(Launch l, PlanLaunch(kOp, dims));
  const size_t smem = 2 * kTileKeys * dims.d * sizeof(float);
  RETURN_IF_ERROR(CheckSmem(kOp, smem));
  CUDA_RETURN_IF_ERROR(LaunchDFlashKernel(p, /*backward=*/false, l.ds, l.threads, smem, stream));
  return Status::Ok();
}

Status DFlashAttentionBackwardPath(DFlashPath path, const DFlashAttentionInputs& in,
                                   const DFlashAttentionConfig& cfg, const TensorView& out,
                                   const TensorView& lse, const TensorView& d_out,
                                   const DFlashAttentionGrads& grads, Stream stream) {
  constexpr const char* kOp = "DFlashAttentionBackward";
  ASSIGN_OR_RETURN(DFlashDims dims, CheckDFlashInputs(kOp, in));
  RETURN_IF_ERROR(CheckDevice(kOp, in));
  const int64_t rows = dims.nb * kDFlashBlockSize, d = dims.d;
  struct Want {
    const char* name;
    const TensorView* t;
    DType dtype;
    Shape shape;
  };
  const Want want[] = {{"out", &out, DType::kBF16, Shape{rows, dims.hq, d}},
                       {"d_out", &d_out, DType::kBF16, Shape{rows, dims.hq, d}},
                       {"lse", &lse, DType::kF32, Shape{rows, dims.hq}},
                       {"dq_blk", &grads.dq_blk, DType::kBF16, Shape{rows, dims.hq, d}},
                       {"dk_blk", &grads.dk_blk, DType::kBF16, Shape{rows, dims.hk, d}},
                       {"dv_blk", &grads.dv_blk, DType::kBF16, Shape{rows, dims.hk, d}},
                       {"dk_ctx", &grads.dk_ctx, DType::kF32, Shape{dims.t, dims.hk, d}},
                       {"dv_ctx", &grads.dv_ctx, DType::kF32, Shape{dims.t, dims.hk, d}}};
  for (const Want& w : want) {
    RETURN_IF_ERROR(ExpectDType(kOp, w.name, *w.t, w.dtype));
    RETURN_IF_ERROR(ExpectShape(kOp, w.name, *w.t, w.shape));
    RETURN_IF_ERROR(ExpectContiguous(kOp, w.name, *w.t));
  }
  const bool have_delta = grads.delta.data() != nullptr;
  if (have_delta) {
    RETURN_IF_ERROR(ExpectDType(kOp, "delta", grads.delta, DType::kF32));
    RETURN_IF_ERROR(ExpectShape(kOp, "delta", grads.delta, Shape{rows, dims.hq}));
    RETURN_IF_ERROR(ExpectContiguous(kOp, "delta", grads.delta));
  }
  Params p = MakeParams(in, cfg, dims);
  ASSIGN_OR_RETURN(const DFlashPlan plan,
                   PlanKernels(kOp, path, dims, p.scale,
                               {&out, &d_out, &grads.dq_blk, &grads.dk_blk, &grads.dv_blk,
                                &grads.dk_ctx, &grads.dv_ctx}));
  const bool mma = plan.query_backward != DFlashKernel::kSimt;
  // The split MMA backward writes every context row itself; the others accumulate.
  const bool split = mma && have_delta && dims.nb > 0;
  if (!split) {
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(grads.dk_ctx.data(), 0, grads.dk_ctx.nbytes(), stream));
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(grads.dv_ctx.data(), 0, grads.dv_ctx.nbytes(), stream));
  }
  if (dims.nb == 0) return Status::Ok();
  p.o_in = out.data();
  p.dout = d_out.data();
  p.lse_in = lse.data_as<const float>();
  p.dq = grads.dq_blk.data();
  p.dkb = grads.dk_blk.data();
  p.dvb = grads.dv_blk.data();
  p.dkc = grads.dk_ctx.data_as<float>();
  p.dvc = grads.dv_ctx.data_as<float>();
  if (split) p.delta = grads.delta.data_as<float>();
  if (mma) {
    RETURN_IF_ERROR(CheckSmem(kOp, DFlashMmaSmemBytes(true, dims.hq / dims.hk, dims.d)));
    if (split) RETURN_IF_ERROR(CheckSmem(kOp, DFlashCtxSmemBytes(plan.context_backward, dims.d)));
    if (split && plan.query_backward == DFlashKernel::kWgmma)
      RETURN_IF_ERROR(CheckSmem(kOp, DFlashWgmmaQuerySmemBytes(dims.d)));
    CUDA_RETURN_IF_ERROR(LaunchDFlashMmaBackward(p, plan, stream));
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(Launch l, PlanLaunch(kOp, dims));
  const int qrows = kDFlashBlockSize * static_cast<int>(dims.hq / dims.hk);
  const size_t smem =
      (2 * kTileKeys * d + 2 * qrows * d + 2 * qrows * kTileStride) * sizeof(float);
  RETURN_IF_ERROR(CheckSmem(kOp, smem));
  CUDA_RETURN_IF_ERROR(LaunchDFlashKernel(p, /*backward=*/true, l.ds, l.threads, smem, stream));
  return Status::Ok();
}

}  // namespace attention_internal

Status DFlashAttentionForward(const DFlashAttentionInputs& in, const DFlashAttentionConfig& cfg,
                              TensorView out, TensorView lse, Stream stream) {
  return attention_internal::DFlashAttentionForwardPath(DFlashPath::kAuto, in, cfg, out, lse,
                                                        stream);
}

Status DFlashAttentionBackward(const DFlashAttentionInputs& in, const DFlashAttentionConfig& cfg,
                               const TensorView& out, const TensorView& lse,
                               const TensorView& d_out, const DFlashAttentionGrads& grads,
                               Stream stream) {
  return attention_internal::DFlashAttentionBackwardPath(DFlashPath::kAuto, in, cfg, out, lse,
                                                         d_out, grads, stream);
}

}  // namespace tandem::kernels
