// MoeFp8ExpertsForward (kernels/moe/experts_fp8.h) on either device, the packing helpers,
// and the CPU reference of the slot quantizer (the CUDA one: experts_fp8_cuda.cc).
#include "kernels/moe/experts_fp8.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/core/stream.h"
#include "kernels/gemm/fp8_format.h"
#include "kernels/mlp/swiglu.h"
#include "kernels/moe/experts_internal.h"

namespace tandem::kernels {
namespace {

constexpr int64_t kAlign = 256;
int64_t AlignUp(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// Expert e of a packed [E, N, K] code tensor and its [E, nb, ld] scales.
Fp8BlockWeight ExpertOf(const TensorView& codes, const TensorView& scale, int64_t e) {
  return {codes.Narrow(0, e, 1).Reshape({codes.dim(1), codes.dim(2)}),
          scale.Narrow(0, e, 1).Reshape({scale.dim(1), scale.dim(2)})};
}

// The slot starts S_0..S_E of `offsets` (host i32 [E + 1]).
std::vector<int64_t> SlotStarts(std::span<const int32_t> offsets) {
  std::vector<int64_t> s(offsets.size(), 0);
  for (size_t e = 0; e + 1 < offsets.size(); ++e)
    s[e + 1] = s[e] + MoeFp8SlotRows(offsets[e + 1] - offsets[e]);
  return s;
}

}  // namespace

Fp8BlockWeight MoeFp8ExpertWeights::GateUp(int64_t e) const {
  return ExpertOf(gate_up, gate_up_scale, e);
}
Fp8BlockWeight MoeFp8ExpertWeights::Down(int64_t e) const { return ExpertOf(down, down_scale, e); }

int64_t MoeFp8ExpertBytes(int64_t e, int64_t i, int64_t h) {
  const int64_t gu_scale = e * Fp8Blocks(2 * i) * Fp8WeightScaleLd(h) * 4;
  const int64_t dn_scale = e * Fp8Blocks(h) * Fp8WeightScaleLd(i) * 4;
  return AlignUp(e * 2 * i * h) + AlignUp(gu_scale) + AlignUp(e * h * i) + AlignUp(dn_scale);
}

MoeFp8ExpertWeights CarveMoeFp8Experts(void* base, int64_t* offset, int64_t e, int64_t i,
                                       int64_t h, Device device) {
  char* b = static_cast<char*>(base);
  auto take = [&](DType dtype, Shape shape) {
    TensorView v(b + *offset, dtype, shape, device);
    *offset += AlignUp(v.nbytes());
    return v;
  };
  MoeFp8ExpertWeights w;
  w.gate_up = take(DType::kF8E4M3, {e, 2 * i, h});
  w.gate_up_scale = take(DType::kF32, {e, Fp8Blocks(2 * i), Fp8WeightScaleLd(h)});
  w.down = take(DType::kF8E4M3, {e, h, i});
  w.down_scale = take(DType::kF32, {e, Fp8Blocks(h), Fp8WeightScaleLd(i)});
  return w;
}

Status CheckMoeFp8Experts(const char* op, const MoeFp8ExpertWeights& w) {
  if (w.gate_up.ndim() != 3 || w.down.ndim() != 3)
    return InvalidArgumentError("{}: fp8 experts must be [E, 2I, H] and [E, H, I], got {} and {}",
                                op, w.gate_up.ToString(), w.down.ToString());
  const int64_t e = w.gate_up.dim(0), i2 = w.gate_up.dim(1), h = w.gate_up.dim(2);
  if (i2 % 2 != 0 || !(w.down.shape() == Shape{e, h, i2 / 2}))
    return InvalidArgumentError("{}: fp8 gate_up {} and down {} disagree", op,
                                w.gate_up.ToString(), w.down.ToString());
  for (int64_t x = 0; x < std::min<int64_t>(e, 1); ++x) {
    RETURN_IF_ERROR(CheckFp8Weight(op, w.GateUp(x)));
    RETURN_IF_ERROR(CheckFp8Weight(op, w.Down(x)));
  }
  RETURN_IF_ERROR(ExpectShape(op, "fp8 gate_up scale", w.gate_up_scale,
                              Shape{e, Fp8Blocks(i2), Fp8WeightScaleLd(h)}));
  RETURN_IF_ERROR(ExpectShape(op, "fp8 down scale", w.down_scale,
                              Shape{e, Fp8Blocks(h), Fp8WeightScaleLd(i2 / 2)}));
  for (const TensorView* v : {&w.gate_up, &w.gate_up_scale, &w.down, &w.down_scale})
    RETURN_IF_ERROR(ExpectContiguous(op, "fp8 experts", *v));
  return ExpectSameDevice(op, w.gate_up, w.down);
}

Status QuantizeMoeFp8Experts(const MoeExpertWeights& w, const MoeFp8ExpertWeights& out,
                             Stream s) {
  constexpr const char* kOp = "QuantizeMoeFp8Experts";
  RETURN_IF_ERROR(CheckMoeFp8Experts(kOp, out));
  if (!(w.gate_up.shape() == out.gate_up.shape()) || !(w.down.shape() == out.down.shape()))
    return InvalidArgumentError("{}: bf16 experts {} / {} do not match the fp8 ones {} / {}", kOp,
                                w.gate_up.ToString(), w.down.ToString(), out.gate_up.ToString(),
                                out.down.ToString());
  const int64_t e = out.experts(), i2 = w.gate_up.dim(1), h = w.gate_up.dim(2);
  for (int64_t x = 0; x < e; ++x) {
    RETURN_IF_ERROR(QuantizeFp8Weight(w.gate_up.Narrow(0, x, 1).Reshape({i2, h}), out.GateUp(x),
                                      s).WithContext(fmt::format("expert {} gate_up", x)));
    RETURN_IF_ERROR(QuantizeFp8Weight(w.down.Narrow(0, x, 1).Reshape({h, i2 / 2}), out.Down(x),
                                      s).WithContext(fmt::format("expert {} down", x)));
  }
  return Status::Ok();
}

int64_t MoeFp8SlotRows(int64_t n) { return n == 0 ? 0 : MoeBucketRows(n); }

int64_t MoeFp8BufferRows(int64_t assignments, int64_t experts) {
  return assignments + assignments / 8 + 16 * experts;
}

TensorView MoeFp8Workspace::Codes(int64_t k) const {
  const int64_t rows = codes.dim(0) * codes.dim(1) / k;
  return TensorView(codes.data(), DType::kF8E4M3, {rows, k}, codes.device());
}

int64_t MoeFp8WorkspaceBytes(int64_t n, int64_t e, int64_t h, int64_t i) {
  const int64_t r = MoeFp8BufferRows(n, e), k = std::max(h, i);
  return AlignUp(r * k) + AlignUp(r * Fp8Blocks(k) * 4) + AlignUp((e + 1) * 4);
}

MoeFp8Workspace CarveMoeFp8Workspace(void* base, int64_t* offset, int64_t n, int64_t e,
                                     int64_t h, int64_t i, Device device) {
  const int64_t r = MoeFp8BufferRows(n, e), k = std::max(h, i);
  char* b = static_cast<char*>(base);
  auto take = [&](DType dtype, Shape shape) {
    TensorView v(b + *offset, dtype, shape, device);
    *offset += AlignUp(v.nbytes());
    return v;
  };
  MoeFp8Workspace ws;
  ws.codes = take(DType::kF8E4M3, {r, k});
  ws.scale = take(DType::kF32, {r * Fp8Blocks(k)});
  ws.slots = take(DType::kI32, {e + 1});
  return ws;
}

namespace internal {
Status CheckMoeFp8Slots(const char* op, const TensorView& x, bool from_slots,
                        const TensorView& offsets, std::span<const int32_t> host_offsets,
                        const TensorView& slots, const TensorView& codes,
                        const TensorView& scale) {
  const int64_t e = static_cast<int64_t>(host_offsets.size()) - 1;
  RETURN_IF_ERROR(ExpectDType(op, "x", x, DType::kBF16));
  RETURN_IF_ERROR(ExpectDType(op, "offsets", offsets, DType::kI32));
  RETURN_IF_ERROR(ExpectDType(op, "slots", slots, DType::kI32));
  RETURN_IF_ERROR(ExpectDType(op, "codes", codes, DType::kF8E4M3));
  RETURN_IF_ERROR(ExpectDType(op, "scale", scale, DType::kF32));
  if (e < 1 || offsets.numel() != e + 1 || slots.numel() != e + 1)
    return InvalidArgumentError("{}: offsets {} and slots {} must have E + 1 = {} elements", op,
                                offsets.ToString(), slots.ToString(), e + 1);
  const int64_t total = SlotStarts(host_offsets).back(), k = codes.ndim() == 2 ? codes.dim(1) : 0;
  const int64_t x_rows = from_slots ? total : host_offsets.back();
  if (x.ndim() != 2 || x.dim(1) != k || x.stride(1) != 1 || x.dim(0) < x_rows ||
      codes.stride(0) != k || codes.dim(0) < total || scale.numel() < total * Fp8Blocks(k))
    return InvalidArgumentError("{}: x {}, codes {}, scale {} cannot hold {} slot rows of {} "
                                "columns", op, x.ToString(), codes.ToString(), scale.ToString(),
                                total, k);
  for (const TensorView* v : {&offsets, &slots, &codes, &scale})
    RETURN_IF_ERROR(ExpectSameDevice(op, x, *v));
  return Status::Ok();
}
}  // namespace internal

namespace cpu {

Status MoeQuantizeFp8Slots(const TensorView& x, bool from_slots, const TensorView& offsets,
                           std::span<const int32_t> host_offsets, const TensorView& slots,
                           const TensorView& codes, const TensorView& scale, Stream) {
  constexpr const char* kOp = "cpu::MoeQuantizeFp8Slots";
  RETURN_IF_ERROR(internal::CheckMoeFp8Slots(kOp, x, from_slots, offsets, host_offsets, slots,
                                             codes, scale));
  const int32_t* o = offsets.data_as<const int32_t>();
  const int64_t e_count = offsets.numel() - 1, k = codes.dim(1), nkb = Fp8Blocks(k);
  int32_t* s = slots.data_as<int32_t>();
  s[0] = 0;
  for (int64_t e = 0; e < e_count; ++e)
    s[e + 1] = static_cast<int32_t>(s[e] + MoeFp8SlotRows(o[e + 1] - o[e]));
  uint8_t* q = codes.data_as<uint8_t>();
  float* sc = scale.data_as<float>();
  const bf16* xs = x.data_as<const bf16>();
  for (int64_t e = 0; e < e_count; ++e) {
    const int64_t n = o[e + 1] - o[e], slot = s[e + 1] - s[e], in = from_slots ? s[e] : o[e];
    for (int64_t m = 0; m < slot; ++m) {
      uint8_t* dst = q + (s[e] + m) * k;
      for (int64_t kb = 0; kb < nkb; ++kb) {
        const int64_t c0 = kb * kFp8Block, c1 = std::min(k, c0 + kFp8Block);
        float amax = 0.f;
        const bf16* row = xs + (in + m) * x.stride(0);
        if (m < n)
          for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(row[c].f()));
        const float g = amax > 0.f ? amax / kE4m3Max : 1.f;
        for (int64_t c = c0; c < c1; ++c) dst[c] = m < n ? FloatToE4m3(row[c].f() / g) : 0;
        sc[s[e] * nkb + kb * slot + m] = g;
      }
    }
  }
  return Status::Ok();
}

}  // namespace cpu

Status MoeQuantizeFp8Slots(const TensorView& x, bool from_slots, const TensorView& offsets,
                           std::span<const int32_t> host_offsets, const TensorView& slots,
                           const TensorView& codes, const TensorView& scale, Stream s) {
  if (x.device().is_cpu())
    return cpu::MoeQuantizeFp8Slots(x, from_slots, offsets, host_offsets, slots, codes, scale, s);
#ifdef TANDEM_HAVE_CUDA
  return cuda::MoeQuantizeFp8Slots(x, from_slots, offsets, host_offsets, slots, codes, scale, s);
#else
  return UnavailableError("MoeQuantizeFp8Slots: a CUDA tensor in a build without CUDA");
#endif
}

Status MoeFp8ExpertsForward(GemmContext* gemm, const MoeFp8ExpertWeights& w,
                            std::span<const int32_t> host_offsets, const TensorView& offsets,
                            const MoeFp8Workspace& ws, const TensorView& x,
                            const TensorView& gate_up, const TensorView& act,
                            const TensorView& y, Stream s) {
  constexpr const char* kOp = "MoeFp8ExpertsForward";
  RETURN_IF_ERROR(CheckMoeFp8Experts(kOp, w));
  const int64_t e_count = w.experts(), h = w.gate_up.dim(2), i = w.down.dim(2);
  if (static_cast<int64_t>(host_offsets.size()) != e_count + 1 || host_offsets[0] != 0)
    return InvalidArgumentError("{}: {} offsets for {} experts", kOp, host_offsets.size(),
                                e_count);
  for (int64_t e = 0; e < e_count; ++e)
    if (host_offsets[e + 1] < host_offsets[e])
      return InvalidArgumentError("{}: offsets decrease at expert {}", kOp, e);
  const std::vector<int64_t> slot = SlotStarts(host_offsets);
  const int64_t n = host_offsets[e_count], rows = slot.back();
  const int64_t y_rows = MoePaddedRows(n);
  for (const TensorView* v : {&gate_up, &act, &y}) RETURN_IF_ERROR(ExpectDType(kOp, "buffer", *v,
                                                                               DType::kBF16));
  if (gate_up.ndim() != 2 || gate_up.dim(1) != 2 * i || gate_up.dim(0) < rows ||
      act.ndim() != 2 || act.dim(1) != i || act.dim(0) < rows || y.ndim() != 2 ||
      y.dim(1) != h || y.dim(0) < y_rows)
    return InvalidArgumentError("{}: gate_up {} and act {} need >= {} rows of 2I {} and I, y {} "
                                ">= {} rows of H {}", kOp, gate_up.ToString(), act.ToString(), rows,
                                2 * i, y.ToString(), y_rows, h);
  if (n == 0) return Status::Ok();
  NvtxRange range(kOp);
  GemmOptions linear;
  linear.trans_b = true;
  // One projection of every expert with rows: out rows at out_row(e), its slot's rows.
  auto project = [&](const TensorView& in, bool from_slots, int64_t k, auto weight,
                     const TensorView& out, auto out_row) -> Status {
    const TensorView codes = ws.Codes(k);
    RETURN_IF_ERROR(MoeQuantizeFp8Slots(in, from_slots, offsets, host_offsets, ws.slots, codes,
                                        ws.scale, s));
    const int64_t nkb = Fp8Blocks(k);
    for (int64_t e = 0; e < e_count; ++e) {  // increasing: see the header on y's rows
      const int64_t r = slot[e + 1] - slot[e];
      if (r == 0) continue;
      const Fp8GroupActivation a{codes.Narrow(0, slot[e], r),
                                 ws.scale.Narrow(0, slot[e] * nkb, r * nkb)};
      RETURN_IF_ERROR(Fp8Gemm(gemm, a, weight(e), out.Narrow(0, out_row(e), r), linear, s)
                          .WithContext(fmt::format("expert {}", e)));
    }
    return Status::Ok();
  };
  RETURN_IF_ERROR(project(x, false, h, [&](int64_t e) { return w.GateUp(e); }, gate_up,
                          [&](int64_t e) { return slot[e]; }));
  const auto [gate, up] = SplitGateUp(gate_up.Narrow(0, 0, rows));
  RETURN_IF_ERROR(SwiGluForward(act.Narrow(0, 0, rows), gate, up, s));
  return project(act, true, i, [&](int64_t e) { return w.Down(e); }, y,
                 [&](int64_t e) { return static_cast<int64_t>(host_offsets[e]); });
}

}  // namespace tandem::kernels
