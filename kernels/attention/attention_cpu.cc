// CPU references for attention.h: argument checks shared with the CUDA versions, the packed
// causal attention and the DFlash block attention (forward and backward). fp32 math on bf16
// inputs, two passes per query row (scores, then softmax), no tiling: clarity over speed.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention/attention.h"

namespace tandem::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

Status ExpectRank(const char* op, const char* what, const TensorView& t, int rank) {
  if (t.ndim() != rank)
    return InvalidArgumentError("{}: {}: expected {} dims, got {}", op, what, rank,
                                t.shape().ToString());
  return ExpectContiguous(op, what, t);
}

float DefaultScale(float scale, int64_t d) {
  return scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(d));
}

float Dot(const bf16* a, const bf16* b, int64_t d) {
  float s = 0.0f;
  for (int64_t i = 0; i < d; ++i) s += a[i].f() * b[i].f();
  return s;
}

// Block b: its document start s and anchor a (context keys [s, a) at most), and the window
// (0: none). Slot i sits at position a + i; with a window W it sees context keys
// >= a + i - (W - 1) and block keys j >= i - (W - 1) (attention.h: the serving rule).
struct BlockRange {
  int64_t s, a;
  int window;
  int64_t CtxLo(int slot) const {
    return window > 0 ? std::max(s, a + slot - (window - 1)) : s;
  }
  int BlkLo(int slot) const { return window > 0 ? std::max(0, slot - (window - 1)) : 0; }
};
Result<BlockRange> RangeOf(const char* op, const DFlashAttentionInputs& in,
                           const DFlashAttentionConfig& cfg, int64_t b, int64_t t) {
  const int64_t a = in.anchors.data_as<int32_t>()[b];
  const int64_t s = in.doc_start.data_as<int32_t>()[b];
  if (s < 0 || s > a || a > t)
    return InvalidArgumentError("{}: block {}: need 0 <= doc_start ({}) <= anchor ({}) <= T ({})",
                                op, b, s, a, t);
  return BlockRange{s, a, std::max(cfg.window, 0)};
}

}  // namespace

Result<VarlenDims> CheckVarlenInputs(const char* op, const TensorView& q, const TensorView& k,
                                     const TensorView& v, const TensorView& cu_seqlens,
                                     const TensorView& out, const TensorView& lse) {
  RETURN_IF_ERROR(ExpectRank(op, "q", q, 3));
  RETURN_IF_ERROR(ExpectRank(op, "k", k, 3));
  RETURN_IF_ERROR(ExpectRank(op, "cu_seqlens", cu_seqlens, 1));
  VarlenDims d{q.dim(0), cu_seqlens.dim(0) - 1, q.dim(1), k.dim(1), q.dim(2)};
  if (d.docs < 1) return InvalidArgumentError("{}: cu_seqlens needs >= 2 entries", op);
  if (d.hk < 1 || d.hq % d.hk != 0)
    return InvalidArgumentError("{}: hq ({}) must be a multiple of hk ({})", op, d.hq, d.hk);
  RETURN_IF_ERROR(ExpectDType(op, "q", q, DType::kBF16));
  RETURN_IF_ERROR(ExpectDType(op, "k", k, DType::kBF16));
  RETURN_IF_ERROR(ExpectDType(op, "v", v, DType::kBF16));
  RETURN_IF_ERROR(ExpectDType(op, "out", out, DType::kBF16));
  RETURN_IF_ERROR(ExpectDType(op, "cu_seqlens", cu_seqlens, DType::kI32));
  RETURN_IF_ERROR(ExpectShape(op, "k", k, Shape{d.t, d.hk, d.d}));
  RETURN_IF_ERROR(ExpectShape(op, "v", v, Shape{d.t, d.hk, d.d}));
  RETURN_IF_ERROR(ExpectShape(op, "out", out, Shape{d.t, d.hq, d.d}));
  RETURN_IF_ERROR(ExpectContiguous(op, "v", v));
  RETURN_IF_ERROR(ExpectContiguous(op, "out", out));
  if (!lse.empty()) {
    RETURN_IF_ERROR(ExpectDType(op, "lse", lse, DType::kF32));
    RETURN_IF_ERROR(ExpectShape(op, "lse", lse, Shape{d.t, d.hq}));
    RETURN_IF_ERROR(ExpectContiguous(op, "lse", lse));
  }
  return d;
}

Result<DFlashDims> CheckDFlashInputs(const char* op, const DFlashAttentionInputs& in) {
  RETURN_IF_ERROR(ExpectRank(op, "q_blk", in.q_blk, 3));
  RETURN_IF_ERROR(ExpectRank(op, "k_ctx", in.k_ctx, 3));
  RETURN_IF_ERROR(ExpectRank(op, "anchors", in.anchors, 1));
  DFlashDims d{in.anchors.dim(0), in.k_ctx.dim(0), in.q_blk.dim(1), in.k_ctx.dim(1),
               in.q_blk.dim(2)};
  if (d.hk < 1 || d.hq % d.hk != 0)
    return InvalidArgumentError("{}: hq ({}) must be a multiple of hk ({})", op, d.hq, d.hk);
  const int64_t rows = d.nb * kDFlashBlockSize;
  const TensorView* bf[] = {&in.q_blk, &in.k_blk, &in.v_blk, &in.k_ctx, &in.v_ctx};
  const char* names[] = {"q_blk", "k_blk", "v_blk", "k_ctx", "v_ctx"};
  const Shape shapes[] = {Shape{rows, d.hq, d.d}, Shape{rows, d.hk, d.d}, Shape{rows, d.hk, d.d},
                          Shape{d.t, d.hk, d.d}, Shape{d.t, d.hk, d.d}};
  for (int i = 0; i < 5; ++i) {
    RETURN_IF_ERROR(ExpectDType(op, names[i], *bf[i], DType::kBF16));
    RETURN_IF_ERROR(ExpectShape(op, names[i], *bf[i], shapes[i]));
    RETURN_IF_ERROR(ExpectContiguous(op, names[i], *bf[i]));
  }
  RETURN_IF_ERROR(ExpectDType(op, "anchors", in.anchors, DType::kI32));
  RETURN_IF_ERROR(ExpectDType(op, "doc_start", in.doc_start, DType::kI32));
  RETURN_IF_ERROR(ExpectShape(op, "doc_start", in.doc_start, Shape{d.nb}));
  RETURN_IF_ERROR(ExpectContiguous(op, "doc_start", in.doc_start));
  return d;
}

Status CausalVarlenAttentionForwardCpu(const TensorView& q, const TensorView& k,
                                       const TensorView& v, const TensorView& cu_seqlens,
                                       int max_seqlen, float scale, TensorView out,
                                       TensorView lse, Stream) {
  constexpr const char* kOp = "CausalVarlenAttentionForwardCpu";
  ASSIGN_OR_RETURN(VarlenDims dims, CheckVarlenInputs(kOp, q, k, v, cu_seqlens, out, lse));
  const int32_t* cu = cu_seqlens.data_as<int32_t>();
  if (cu[0] != 0 || cu[dims.docs] != dims.t)
    return InvalidArgumentError("{}: cu_seqlens must run from 0 to T ({})", kOp, dims.t);
  const int64_t d = dims.d, group = dims.hq / dims.hk;
  const float sc = DefaultScale(scale, d);
  const bf16* qp = q.data_as<bf16>();
  const bf16* kp = k.data_as<bf16>();
  const bf16* vp = v.data_as<bf16>();
  std::vector<float> p, acc(d);
  for (int64_t doc = 0; doc < dims.docs; ++doc) {
    const int64_t s = cu[doc], e = cu[doc + 1];
    if (e < s || e - s > max_seqlen)
      return InvalidArgumentError("{}: document {} is [{}, {}), max_seqlen {}", kOp, doc, s, e,
                                  max_seqlen);
    for (int64_t i = s; i < e; ++i) {
      for (int64_t h = 0; h < dims.hq; ++h) {
        const int64_t kh = h / group;
        const bf16* qi = qp + (i * dims.hq + h) * d;
        p.assign(i - s + 1, 0.0f);
        float m = kNegInf;
        for (int64_t j = s; j <= i; ++j) {
          p[j - s] = sc * Dot(qi, kp + (j * dims.hk + kh) * d, d);
          m = std::max(m, p[j - s]);
        }
        float l = 0.0f;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t j = s; j <= i; ++j) {
          const float w = std::exp(p[j - s] - m);
          l += w;
          const bf16* vj = vp + (j * dims.hk + kh) * d;
          for (int64_t c = 0; c < d; ++c) acc[c] += w * vj[c].f();
        }
        bf16* oi = out.data_as<bf16>() + (i * dims.hq + h) * d;
        for (int64_t c = 0; c < d; ++c) oi[c] = bf16(acc[c] / l);
        if (!lse.empty()) lse.data_as<float>()[i * dims.hq + h] = m + std::log(l);
      }
    }
  }
  return Status::Ok();
}

namespace {

// Visits the keys query slot `slot` of block b sees: fn(key pointer row index into K/V,
// is_block_key). Context rows index k_ctx/v_ctx, block rows index k_blk/v_blk.
template <typename Fn>
void ForEachKey(const BlockRange& r, int64_t b, int slot, bool causal, Fn&& fn) {
  for (int64_t j = r.CtxLo(slot); j < r.a; ++j) fn(j, false);
  const int n = causal ? slot + 1 : kDFlashBlockSize;
  for (int j = r.BlkLo(slot); j < n; ++j) fn(b * kDFlashBlockSize + j, true);
}

}  // namespace

Status DFlashAttentionForwardCpu(const DFlashAttentionInputs& in,
                                 const DFlashAttentionConfig& cfg, TensorView out,
                                 TensorView lse, Stream) {
  constexpr const char* kOp = "DFlashAttentionForwardCpu";
  ASSIGN_OR_RETURN(DFlashDims dims, CheckDFlashInputs(kOp, in));
  const int64_t rows = dims.nb * kDFlashBlockSize, d = dims.d, group = dims.hq / dims.hk;
  RETURN_IF_ERROR(ExpectDType(kOp, "out", out, DType::kBF16));
  RETURN_IF_ERROR(ExpectShape(kOp, "out", out, Shape{rows, dims.hq, d}));
  RETURN_IF_ERROR(ExpectDType(kOp, "lse", lse, DType::kF32));
  RETURN_IF_ERROR(ExpectShape(kOp, "lse", lse, Shape{rows, dims.hq}));
  const float sc = DefaultScale(cfg.scale, d);
  std::vector<float> p, acc(d);
  for (int64_t b = 0; b < dims.nb; ++b) {
    ASSIGN_OR_RETURN(BlockRange r, RangeOf(kOp, in, cfg, b, dims.t));
    for (int slot = 0; slot < kDFlashBlockSize; ++slot) {
      const int64_t row = b * kDFlashBlockSize + slot;
      for (int64_t h = 0; h < dims.hq; ++h) {
        const int64_t kh = h / group;
        const bf16* qi = in.q_blk.data_as<bf16>() + (row * dims.hq + h) * d;
        p.clear();
        float m = kNegInf;
        ForEachKey(r, b, slot, cfg.causal_in_block, [&](int64_t j, bool blk) {
          const bf16* kj = (blk ? in.k_blk : in.k_ctx).data_as<bf16>() + (j * dims.hk + kh) * d;
          p.push_back(sc * Dot(qi, kj, d));
          m = std::max(m, p.back());
        });
        float l = 0.0f;
        size_t idx = 0;
        std::fill(acc.begin(), acc.end(), 0.0f);
        ForEachKey(r, b, slot, cfg.causal_in_block, [&](int64_t j, bool blk) {
          const float w = std::exp(p[idx++] - m);
          l += w;
          const bf16* vj = (blk ? in.v_blk : in.v_ctx).data_as<bf16>() + (j * dims.hk + kh) * d;
          for (int64_t c = 0; c < d; ++c) acc[c] += w * vj[c].f();
        });
        bf16* oi = out.data_as<bf16>() + (row * dims.hq + h) * d;
        for (int64_t c = 0; c < d; ++c) oi[c] = bf16(acc[c] / l);
        lse.data_as<float>()[row * dims.hq + h] = m + std::log(l);
      }
    }
  }
  return Status::Ok();
}

Status DFlashAttentionBackwardCpu(const DFlashAttentionInputs& in,
                                  const DFlashAttentionConfig& cfg, const TensorView& out,
                                  const TensorView& lse, const TensorView& d_out,
                                  const DFlashAttentionGrads& grads, Stream) {
  constexpr const char* kOp = "DFlashAttentionBackwardCpu";
  ASSIGN_OR_RETURN(DFlashDims dims, CheckDFlashInputs(kOp, in));
  const int64_t rows = dims.nb * kDFlashBlockSize, d = dims.d, group = dims.hq / dims.hk;
  RETURN_IF_ERROR(ExpectShape(kOp, "out", out, Shape{rows, dims.hq, d}));
  RETURN_IF_ERROR(ExpectShape(kOp, "d_out", d_out, Shape{rows, dims.hq, d}));
  RETURN_IF_ERROR(ExpectShape(kOp, "lse", lse, Shape{rows, dims.hq}));
  RETURN_IF_ERROR(ExpectShape(kOp, "dq_blk", grads.dq_blk, Shape{rows, dims.hq, d}));
  RETURN_IF_ERROR(ExpectShape(kOp, "dk_blk", grads.dk_blk, Shape{rows, dims.hk, d}));
  RETURN_IF_ERROR(ExpectShape(kOp, "dv_blk", grads.dv_blk, Shape{rows, dims.hk, d}));
  RETURN_IF_ERROR(ExpectShape(kOp, "dk_ctx", grads.dk_ctx, Shape{dims.t, dims.hk, d}));
  RETURN_IF_ERROR(ExpectShape(kOp, "dv_ctx", grads.dv_ctx, Shape{dims.t, dims.hk, d}));
  RETURN_IF_ERROR(ExpectDType(kOp, "dk_ctx", grads.dk_ctx, DType::kF32));
  RETURN_IF_ERROR(ExpectDType(kOp, "dv_ctx", grads.dv_ctx, DType::kF32));
  const float sc = DefaultScale(cfg.scale, d);
  // Block-key grads accumulate in fp32 here and are rounded to bf16 at the end.
  std::vector<float> dk_blk(rows * dims.hk * d, 0.0f), dv_blk(dk_blk.size(), 0.0f);
  float* dk_ctx = grads.dk_ctx.data_as<float>();
  float* dv_ctx = grads.dv_ctx.data_as<float>();
  std::fill(dk_ctx, dk_ctx + grads.dk_ctx.numel(), 0.0f);
  std::fill(dv_ctx, dv_ctx + grads.dv_ctx.numel(), 0.0f);
  std::vector<float> dq(d);
  for (int64_t b = 0; b < dims.nb; ++b) {
    ASSIGN_OR_RETURN(BlockRange r, RangeOf(kOp, in, cfg, b, dims.t));
    for (int slot = 0; slot < kDFlashBlockSize; ++slot) {
      const int64_t row = b * kDFlashBlockSize + slot;
      for (int64_t h = 0; h < dims.hq; ++h) {
        const int64_t kh = h / group, qoff = (row * dims.hq + h) * d;
        const bf16* qi = in.q_blk.data_as<bf16>() + qoff;
        const bf16* oi = out.data_as<bf16>() + qoff;
        const bf16* doi = d_out.data_as<bf16>() + qoff;
        const float l = lse.data_as<float>()[row * dims.hq + h];
        const float delta = Dot(doi, oi, d);  // rowsum(dO * O)
        std::fill(dq.begin(), dq.end(), 0.0f);
        ForEachKey(r, b, slot, cfg.causal_in_block, [&](int64_t j, bool blk) {
          const int64_t koff = (j * dims.hk + kh) * d;
          const bf16* kj = (blk ? in.k_blk : in.k_ctx).data_as<bf16>() + koff;
          const bf16* vj = (blk ? in.v_blk : in.v_ctx).data_as<bf16>() + koff;
          const float p = std::exp(sc * Dot(qi, kj, d) - l);
          const float ds = p * (Dot(doi, vj, d) - delta);
          float* dkj = blk ? &dk_blk[koff] : dk_ctx + koff;
          float* dvj = blk ? &dv_blk[koff] : dv_ctx + koff;
          for (int64_t c = 0; c < d; ++c) {
            dq[c] += sc * ds * kj[c].f();
            dkj[c] += sc * ds * qi[c].f();
            dvj[c] += p * doi[c].f();
          }
        });
        bf16* dqi = grads.dq_blk.data_as<bf16>() + qoff;
        for (int64_t c = 0; c < d; ++c) dqi[c] = bf16(dq[c]);
      }
    }
  }
  for (size_t i = 0; i < dk_blk.size(); ++i) {
    grads.dk_blk.data_as<bf16>()[i] = bf16(dk_blk[i]);
    grads.dv_blk.data_as<bf16>()[i] = bf16(dv_blk[i]);
  }
  return Status::Ok();
}

}  // namespace tandem::kernels
