// The row-wise FP8 expert path (kernels/moe/experts_fp8.h) on either device: the weight
// packing and quantization, the workspace, the kernels' device dispatch, and the two forwards
// (the kernels: experts_fp8_cpu.cc and experts_fp8.cu; the GEMM: kernels/gemm/fp8_raw.h).
// Thread-safety: stateless; the forwards are ordered on their stream (GemmContext's rules).
#include "kernels/moe/experts_fp8.h"

#include <algorithm>
#include <vector>

#include "kernels/core/stream.h"
#include "kernels/gemm/fp8.h"
#include "kernels/gemm/fp8_raw.h"

namespace tandem::kernels {
namespace {

constexpr int64_t kAlign = 256;
int64_t AlignUp(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// Carves views one after the other out of base + *offset, each 256-byte aligned.
struct Carver {
  char* base;
  int64_t* offset;
  Device device;
  TensorView Take(DType dtype, Shape shape) {
    TensorView v(base + *offset, dtype, shape, device);
    *offset += AlignUp(v.nbytes());
    return v;
  }
};

Status CheckOffsets(const char* op, std::span<const int32_t> offsets, int64_t e_count) {
  if (static_cast<int64_t>(offsets.size()) != e_count + 1 || offsets[0] != 0)
    return InvalidArgumentError("{}: {} offsets for {} experts (need E + 1, starting at 0)", op,
                                offsets.size(), e_count);
  for (int64_t e = 0; e < e_count; ++e)
    if (offsets[e + 1] < offsets[e])
      return InvalidArgumentError("{}: offsets decrease at expert {}", op, e);
  return Status::Ok();
}

// The bf16 buffers of a forward: x [>= x_rows, H], gate_up [>= rows, 2I], y [>= rows, H];
// on CUDA, H and I multiples of 16.
Status CheckBuffers(const char* op, const MoeFp8ExpertWeights& w, const MoeFp8Workspace& ws,
                    const TensorView& x, int64_t x_rows, const TensorView& gate_up,
                    const TensorView& y, int64_t rows) {
  RETURN_IF_ERROR(CheckMoeFp8Experts(op, w));
  const int64_t h = w.gate_up.dim(2), i = w.down.dim(2);
  for (const TensorView* v : {&x, &gate_up, &y})
    RETURN_IF_ERROR(ExpectDType(op, "buffer", *v, DType::kBF16));
  if (x.ndim() != 2 || x.dim(1) != h || x.dim(0) < x_rows || gate_up.ndim() != 2 ||
      gate_up.dim(1) != 2 * i || gate_up.dim(0) < rows || y.ndim() != 2 || y.dim(1) != h ||
      y.dim(0) < rows)
    return InvalidArgumentError("{}: x {} needs >= {} rows of H {}; gate_up {} and y {} >= {} "
                                "rows of 2I {} and H", op, x.ToString(), x_rows, h,
                                gate_up.ToString(), y.ToString(), rows, 2 * i);
  if (ws.codes.empty() || ws.rows() < rows || ws.codes.dim(1) < std::max(h, i))
    return InvalidArgumentError("{}: workspace codes {} hold fewer than {} rows of {}", op,
                                ws.codes.ToString(), rows, std::max(h, i));
  if (x.device().is_cuda() && (h % 16 != 0 || i % 16 != 0))
    return InvalidArgumentError("{}: cuBLASLt's FP8 GEMMs need H and I multiples of 16, got "
                                "H={} I={}", op, h, i);
  for (const TensorView* v : {&gate_up, &y, &ws.codes, &w.gate_up})
    RETURN_IF_ERROR(ExpectSameDevice(op, x, *v));
  return Status::Ok();
}

// gate_up's raw products -> act codes -> down's raw products -> y, over `rows`; `project`
// runs one projection (weights [E, N, K], codes [R, K] -> out [R, N]).
template <class Project>
Status SwiGluAndDown(const MoeFp8ExpertWeights& w, const MoeFp8Workspace& ws,
                     const MoeFp8Rows& rows, const TensorView& gate_up, const TensorView& y,
                     Project project, bool rescale, Stream s) {
  const int64_t i = w.down.dim(2);
  const TensorView act = ws.Codes(i);
  RETURN_IF_ERROR(MoeFp8SwiGluQuantize(gate_up, ws.XScale(), w.gate_up_scale, rows, act,
                                       ws.ActScale(), s));
  RETURN_IF_ERROR(project(w.down, act, y));
  if (!rescale) return Status::Ok();
  return MoeFp8ScaleRows(y, ws.ActScale(), w.down_scale, rows, s);
}

}  // namespace

int64_t MoeFp8ExpertBytes(int64_t e, int64_t i, int64_t h) {
  return AlignUp(e * 2 * i * h) + AlignUp(e * 2 * i * 4) + AlignUp(e * h * i) +
         AlignUp(e * h * 4);
}

MoeFp8ExpertWeights CarveMoeFp8Experts(void* base, int64_t* offset, int64_t e, int64_t i,
                                       int64_t h, Device device) {
  Carver c{static_cast<char*>(base), offset, device};
  MoeFp8ExpertWeights w;
  w.gate_up = c.Take(DType::kF8E4M3, {e, 2 * i, h});
  w.gate_up_scale = c.Take(DType::kF32, {e, 2 * i});
  w.down = c.Take(DType::kF8E4M3, {e, h, i});
  w.down_scale = c.Take(DType::kF32, {e, h});
  return w;
}

Status CheckMoeFp8Experts(const char* op, const MoeFp8ExpertWeights& w) {
  if (w.gate_up.ndim() != 3 || w.down.ndim() != 3)
    return InvalidArgumentError("{}: fp8 experts must be [E, 2I, H] and [E, H, I], got {} and {}",
                                op, w.gate_up.ToString(), w.down.ToString());
  const int64_t e = w.gate_up.dim(0), i2 = w.gate_up.dim(1), h = w.gate_up.dim(2);
  if (e < 1 || i2 % 2 != 0 || !(w.down.shape() == Shape{e, h, i2 / 2}))
    return InvalidArgumentError("{}: fp8 gate_up {} and down {} disagree", op,
                                w.gate_up.ToString(), w.down.ToString());
  RETURN_IF_ERROR(ExpectDType(op, "fp8 gate_up", w.gate_up, DType::kF8E4M3));
  RETURN_IF_ERROR(ExpectDType(op, "fp8 down", w.down, DType::kF8E4M3));
  RETURN_IF_ERROR(ExpectDType(op, "fp8 gate_up scale", w.gate_up_scale, DType::kF32));
  RETURN_IF_ERROR(ExpectDType(op, "fp8 down scale", w.down_scale, DType::kF32));
  RETURN_IF_ERROR(ExpectShape(op, "fp8 gate_up scale", w.gate_up_scale, Shape{e, i2}));
  RETURN_IF_ERROR(ExpectShape(op, "fp8 down scale", w.down_scale, Shape{e, h}));
  for (const TensorView* v : {&w.gate_up, &w.gate_up_scale, &w.down, &w.down_scale}) {
    RETURN_IF_ERROR(ExpectContiguous(op, "fp8 experts", *v));
    RETURN_IF_ERROR(ExpectSameDevice(op, w.gate_up, *v));
  }
  return Status::Ok();
}

Status QuantizeMoeFp8Experts(const MoeExpertWeights& w, const MoeFp8ExpertWeights& out,
                             Stream s) {
  constexpr const char* kOp = "QuantizeMoeFp8Experts";
  RETURN_IF_ERROR(CheckMoeFp8Experts(kOp, out));
  if (!(w.gate_up.shape() == out.gate_up.shape()) || !(w.down.shape() == out.down.shape()))
    return InvalidArgumentError("{}: bf16 experts {} / {} do not match the fp8 ones {} / {}", kOp,
                                w.gate_up.ToString(), w.down.ToString(), out.gate_up.ToString(),
                                out.down.ToString());
  for (const TensorView* v : {&w.gate_up, &w.down}) {
    RETURN_IF_ERROR(ExpectContiguous(kOp, "bf16 experts", *v));
    RETURN_IF_ERROR(ExpectSameDevice(kOp, *v, out.gate_up));
  }
  const int64_t e = out.experts(), i2 = w.gate_up.dim(1), h = w.gate_up.dim(2);
  auto rows_of = [](const TensorView& m) {  // [E, N, K] as [E N, K]
    return m.Reshape({m.dim(0) * m.dim(1), m.dim(2)});
  };
  RETURN_IF_ERROR(MoeFp8QuantizeRows(rows_of(w.gate_up), {}, {{}, 0, e * i2},
                                     rows_of(out.gate_up), out.gate_up_scale.Reshape({e * i2}), s)
                      .WithContext("experts' gate_up"));
  return MoeFp8QuantizeRows(rows_of(w.down), {}, {{}, 0, e * h}, rows_of(out.down),
                            out.down_scale.Reshape({e * h}), s)
      .WithContext("experts' down");
}

int64_t MoeFp8BufferRows(int64_t assignments) { return MoeExpertBufferRows(assignments); }

TensorView MoeFp8Workspace::Codes(int64_t k) const {
  const int64_t r = rows();
  return TensorView(codes.data(), DType::kF8E4M3, {r, k}, codes.device());
}

int64_t MoeFp8WorkspaceBytes(int64_t n, int64_t h, int64_t i) {
  const int64_t r = MoeFp8BufferRows(n), k = std::max(h, i);
  return AlignUp(r * k) + AlignUp(r * (2 + Fp8Blocks(k)) * 4);
}

MoeFp8Workspace CarveMoeFp8Workspace(void* base, int64_t* offset, int64_t n, int64_t h,
                                     int64_t i, Device device) {
  const int64_t r = MoeFp8BufferRows(n), k = std::max(h, i);
  Carver c{static_cast<char*>(base), offset, device};
  MoeFp8Workspace ws;
  ws.codes = c.Take(DType::kF8E4M3, {r, k});
  ws.scale = c.Take(DType::kF32, {r * (2 + Fp8Blocks(k))});
  return ws;
}

Status MoeFp8QuantizeRows(const TensorView& x, const TensorView& gather, const MoeFp8Rows& rows,
                          const TensorView& codes, const TensorView& scale, Stream s) {
  if (x.device().is_cpu()) return cpu::MoeFp8QuantizeRows(x, gather, rows, codes, scale, s);
  return cuda::MoeFp8QuantizeRows(x, gather, rows, codes, scale, s);
}

Status MoeFp8GatherRows(const TensorView& src, const TensorView& src_scale,
                        const TensorView& gather, const MoeFp8Rows& rows, const TensorView& codes,
                        const TensorView& scale, Stream s) {
  if (src.device().is_cpu())
    return cpu::MoeFp8GatherRows(src, src_scale, gather, rows, codes, scale, s);
  return cuda::MoeFp8GatherRows(src, src_scale, gather, rows, codes, scale, s);
}

Status MoeFp8SwiGluQuantize(const TensorView& raw, const TensorView& x_scale,
                            const TensorView& w_scale, const MoeFp8Rows& rows,
                            const TensorView& codes, const TensorView& act_scale, Stream s) {
  if (raw.device().is_cpu())
    return cpu::MoeFp8SwiGluQuantize(raw, x_scale, w_scale, rows, codes, act_scale, s);
  return cuda::MoeFp8SwiGluQuantize(raw, x_scale, w_scale, rows, codes, act_scale, s);
}

Status MoeFp8ScaleRows(const TensorView& y, const TensorView& act_scale,
                       const TensorView& w_scale, const MoeFp8Rows& rows, Stream s) {
  if (y.device().is_cpu()) return cpu::MoeFp8ScaleRows(y, act_scale, w_scale, rows, s);
  return cuda::MoeFp8ScaleRows(y, act_scale, w_scale, rows, s);
}

Status MoeFp8ExpertsForward(GemmContext* gemm, const MoeFp8ExpertWeights& w,
                            std::span<const int32_t> host_offsets, const TensorView& offsets,
                            const MoeFp8Workspace& ws, const TensorView& x,
                            const TensorView& gate_up, const TensorView& y, Stream s,
                            bool rescale) {
  constexpr const char* kOp = "MoeFp8ExpertsForward";
  RETURN_IF_ERROR(CheckMoeFp8Experts(kOp, w));
  const int64_t e_count = w.experts(), h = w.gate_up.dim(2);
  RETURN_IF_ERROR(CheckOffsets(kOp, host_offsets, e_count));
  const int64_t n = host_offsets[e_count];
  const bool bucket = x.device().is_cuda();
  const int64_t rows = bucket ? MoePaddedRows(n) : n;
  RETURN_IF_ERROR(CheckBuffers(kOp, w, ws, x, rows, gate_up, y, rows));
  if (n == 0) return Status::Ok();
  NvtxRange range(kOp);
  const MoeFp8Rows layout{offsets, 0, n};
  // One GEMM per expert with rows, in increasing order (see the header on buckets).
  auto project = [&](const TensorView& weight, const TensorView& codes,
                     const TensorView& out) -> Status {
    for (int64_t e = 0; e < e_count; ++e) {
      const int64_t count = host_offsets[e + 1] - host_offsets[e];
      if (count == 0) continue;
      const int64_t r = bucket ? MoeBucketRows(count) : count, o = host_offsets[e];
      RETURN_IF_ERROR(Fp8GemmRaw(gemm, codes.Narrow(0, o, r), weight.Narrow(0, e, 1),
                                 out.Narrow(0, o, r), 1, s)
                          .WithContext(fmt::format("{}: expert {} ({} rows)", kOp, e, count)));
    }
    return Status::Ok();
  };
  const TensorView x8 = ws.Codes(h);
  RETURN_IF_ERROR(MoeFp8QuantizeRows(x, {}, layout, x8, ws.XScale(), s));
  RETURN_IF_ERROR(project(w.gate_up, x8, gate_up));
  return SwiGluAndDown(w, ws, layout, gate_up, y, project, rescale, s);
}

Status MoeFp8ExpertsForwardPadded(GemmContext* gemm, const MoeFp8ExpertWeights& w,
                                  std::span<const int32_t> host_offsets,
                                  const TensorView& offsets, int64_t cap,
                                  const MoeFp8Workspace& ws, const TensorView& x,
                                  const TensorView& padded_token, const TensorView& gate_up,
                                  const TensorView& y, Stream s, bool rescale) {
  constexpr const char* kOp = "MoeFp8ExpertsForwardPadded";
  RETURN_IF_ERROR(CheckMoeFp8Experts(kOp, w));
  const int64_t e_count = w.experts(), h = w.gate_up.dim(2);
  RETURN_IF_ERROR(CheckOffsets(kOp, host_offsets, e_count));
  int64_t most = 0;
  for (int64_t e = 0; e < e_count; ++e)
    most = std::max<int64_t>(most, host_offsets[e + 1] - host_offsets[e]);
  if (cap < std::max<int64_t>(most, 1))
    return InvalidArgumentError("{}: cap {} is below the most rows of an expert ({})", kOp, cap,
                                most);
  const int64_t rows = e_count * cap;
  RETURN_IF_ERROR(CheckBuffers(kOp, w, ws, x, 0, gate_up, y, rows));
  if (x.data() == y.data())
    return InvalidArgumentError("{}: y may not be x (the tokens)", kOp);
  if (host_offsets[e_count] == 0) return Status::Ok();
  NvtxRange range(kOp);
  const MoeFp8Rows layout{offsets, cap, rows};
  // One strided-batched GEMM over all E experts: batch e is rows [e cap, e cap + cap).
  auto project = [&](const TensorView& weight, const TensorView& codes,
                     const TensorView& out) -> Status {
    return Fp8GemmRaw(gemm, codes.Narrow(0, 0, rows), weight, out.Narrow(0, 0, rows), e_count,
                      s)
        .WithContext(fmt::format("{}: {} experts x {} rows", kOp, e_count, cap));
  };
  const TensorView x8 = ws.Codes(h);
  const int64_t t = x.dim(0);
  if (2 * t <= host_offsets[e_count] && gate_up.is_contiguous() && gate_up.nbytes() >= t * h) {
    // Each token quantized once (its codes in gate_up's bytes, its scale in ActScale, both
    // free until the GEMMs), then copied to its rows.
    const TensorView tokens8(gate_up.data(), DType::kF8E4M3, {t, h}, gate_up.device());
    const TensorView tokens_scale = ws.ActScale().Narrow(0, 0, t);
    RETURN_IF_ERROR(MoeFp8QuantizeRows(x, {}, {{}, 0, t}, tokens8, tokens_scale, s));
    RETURN_IF_ERROR(MoeFp8GatherRows(tokens8, tokens_scale, padded_token, layout, x8,
                                     ws.XScale(), s));
  } else {
    RETURN_IF_ERROR(MoeFp8QuantizeRows(x, padded_token, layout, x8, ws.XScale(), s));
  }
  RETURN_IF_ERROR(project(w.gate_up, x8, gate_up));
  return SwiGluAndDown(w, ws, layout, gate_up, y, project, rescale, s);
}

}  // namespace tandem::kernels
