// Test-only utilities of the row-wise FP8 expert path (experts_fp8.h): a problem (bf16
// experts, rows laid out by offsets), running either layout of the path on either device
// from host copies, and the float64 definition (weights and activations dequantized from
// their e4m3 codes and row scales, every sum in float64, no intermediate rounding).
// Thread-safety: free functions on caller-owned data.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/core/dtype.h"
#include "kernels/gemm/fp8_format.h"
#include "kernels/moe/experts_fp8.h"
#include "kernels/moe/moe_testing.h"
#include "kernels/testing/testing.h"

namespace tandem::kernels::testing {

struct MoeFp8Problem {
  int64_t e = 0, h = 0, i = 0;
  std::vector<int32_t> offsets;  // [E + 1]
  std::vector<bf16> x, gate_up, down;
};

inline MoeFp8Problem RandomMoeFp8Problem(int64_t e, int64_t h, int64_t i,
                                         std::vector<int32_t> offsets, uint64_t seed) {
  MoeFp8Problem p{e, h, i, std::move(offsets), {}, {}, {}};
  const int64_t n = p.offsets.back();
  p.x = RandomBf16(n * h, seed, -2.f, 2.f);
  const float gb = 1.f / std::sqrt(static_cast<float>(h));
  const float db = 1.f / std::sqrt(static_cast<float>(i));
  p.gate_up = RandomBf16(e * 2 * i * h, seed + 1, -gb, gb);
  p.down = RandomBf16(e * h * i, seed + 2, -db, db);
  return p;
}

// The path's y rows [N, H] (expert e's rows at o_e, whatever the layout) and the quantized
// experts' codes and row scales (for the reference).
struct MoeFp8Result {
  std::vector<bf16> y;
  std::vector<uint8_t> gu_codes, dn_codes;
  std::vector<float> gu_scale, dn_scale;
};

// p's rows made copies of its first `tokens` rows: row r = row r % tokens (as top-k routing
// sends each token to k experts).
inline void RepeatTokens(MoeFp8Problem* p, int64_t tokens) {
  for (size_t k = static_cast<size_t>(tokens * p->h); k < p->x.size(); ++k)
    p->x[k] = p->x[k % static_cast<size_t>(tokens * p->h)];
}

// The FP8 path on `alloc`'s device (gemm: its context, null on the CPU): quantizes the
// experts there and runs the exact layout (padded false; y aliases x, as MoeLayer runs it) or
// the padded one (cap = MoeExpertCapacity; padded_token takes x row o_e + j for expert e's
// row j, so x plays the tokens; with `tokens` > 0, x is p's first `tokens` rows and
// padded_token takes row (o_e + j) % tokens: p must be RepeatTokens'd).
inline MoeFp8Result RunMoeFp8Experts(Allocator& alloc, GemmContext* gemm,
                                     const MoeFp8Problem& p, bool padded, int64_t tokens = 0) {
  const int64_t e = p.e, h = p.h, i = p.i, n = p.offsets.back();
  const int64_t cap = MoeExpertCapacity(p.offsets);
  const int64_t rows = padded ? e * cap : MoePaddedRows(n);
  Tensor gu = MakeTensor<bf16>(alloc, DType::kBF16, {e, 2 * i, h}, p.gate_up);
  Tensor dn = MakeTensor<bf16>(alloc, DType::kBF16, {e, h, i}, p.down);
  std::vector<bf16> xpad(static_cast<size_t>(std::max(rows, n) * h), bf16(0.f));
  std::copy(p.x.begin(), p.x.end(), xpad.begin());
  Tensor x = MakeTensor<bf16>(alloc, DType::kBF16, {std::max(rows, n), h}, xpad);
  Tensor off = MakeTensor<int32_t>(alloc, DType::kI32, {e + 1}, p.offsets);
  std::vector<int32_t> from(static_cast<size_t>(e * cap), 0);
  for (int64_t x_e = 0; x_e < e; ++x_e)
    for (int32_t j = 0; j < p.offsets[x_e + 1] - p.offsets[x_e]; ++j)
      from[x_e * cap + j] = tokens > 0 ? (p.offsets[x_e] + j) % tokens : p.offsets[x_e] + j;
  Tensor padded_token = MakeTensor<int32_t>(alloc, DType::kI32, {e * cap}, from);
  auto empty = [&](DType dtype, Shape shape) {
    Result<Tensor> t = Tensor::Empty(alloc, dtype, shape);
    TANDEM_CHECK_OK(t.status());
    return std::move(t).value();
  };
  // Sized for E cap rows too: the padded layout also runs where the rule would not pick it.
  const int64_t sized = std::max(n, e * cap), buffer_rows = MoeFp8BufferRows(sized);
  Tensor w8 = empty(DType::kU8, {MoeFp8ExpertBytes(e, i, h)});
  Tensor ws = empty(DType::kU8, {MoeFp8WorkspaceBytes(sized, h, i)});
  Tensor gate_up = empty(DType::kBF16, {buffer_rows, 2 * i});
  Tensor y = empty(DType::kBF16, {buffer_rows, h});
  int64_t o1 = 0, o2 = 0;
  const MoeFp8ExpertWeights w = CarveMoeFp8Experts(w8.data(), &o1, e, i, h, alloc.device());
  const MoeFp8Workspace work =
      CarveMoeFp8Workspace(ws.data(), &o2, sized, h, i, alloc.device());
  TANDEM_CHECK_OK(QuantizeMoeFp8Experts({gu.view(), dn.view()}, w, nullptr));
  MoeFp8Result r;
  if (padded) {
    TANDEM_CHECK_OK(MoeFp8ExpertsForwardPadded(gemm, w, p.offsets, off.view(), cap, work,
                                               x.view().Narrow(0, 0, tokens > 0 ? tokens : n),
                                               padded_token.view(),
                                               gate_up.view(), y.view(), nullptr));
    const std::vector<bf16> all = ToHost<bf16>(y.view().Narrow(0, 0, e * cap));
    for (int64_t x_e = 0; x_e < e; ++x_e)
      r.y.insert(r.y.end(), all.begin() + x_e * cap * h,
                 all.begin() + (x_e * cap + p.offsets[x_e + 1] - p.offsets[x_e]) * h);
  } else {
    TANDEM_CHECK_OK(MoeFp8ExpertsForward(gemm, w, p.offsets, off.view(), work, x.view(),
                                         gate_up.view(), x.view(), nullptr));
    r.y = ToHost<bf16>(x.view().Narrow(0, 0, n));
  }
  r.gu_codes = ToHost<uint8_t>(w.gate_up);
  r.dn_codes = ToHost<uint8_t>(w.down);
  r.gu_scale = ToHost<float>(w.gate_up_scale);
  r.dn_scale = ToHost<float>(w.down_scale);
  return r;
}

// v quantized with one scale for the whole row and dequantized (the path's rounding).
inline std::vector<double> Fp8RowRoundTrip(const std::vector<double>& v) {
  float amax = 0.f;
  for (double d : v) amax = std::max(amax, std::fabs(static_cast<float>(d)));
  const float s = amax > 0.f ? amax / kE4m3Max : 1.f;
  std::vector<double> out(v.size());
  for (size_t c = 0; c < v.size(); ++c)
    out[c] = static_cast<double>(E4m3ToFloat(FloatToE4m3(static_cast<float>(v[c]) / s))) * s;
  return out;
}

// Expert `x` of codes [E, rows, cols] with row scales [E, rows], times v, in float64.
inline std::vector<double> Fp8RowMatVec(const std::vector<uint8_t>& codes,
                                        const std::vector<float>& scale, int64_t x,
                                        int64_t rows, int64_t cols,
                                        const std::vector<double>& v) {
  std::vector<double> out(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0.0;
    for (int64_t c = 0; c < cols; ++c)
      acc += static_cast<double>(E4m3ToFloat(codes[(x * rows + r) * cols + c])) * v[c];
    out[r] = acc * scale[x * rows + r];
  }
  return out;
}

// The float64 definition of the path's y rows [N, H] over r's quantized experts.
inline std::vector<double> MoeFp8ExpertsRef(const MoeFp8Problem& p, const MoeFp8Result& r) {
  const int64_t h = p.h, i = p.i;
  std::vector<double> want;
  for (int64_t x = 0; x < p.e; ++x)
    for (int32_t row = p.offsets[x]; row < p.offsets[x + 1]; ++row) {
      std::vector<double> xr(static_cast<size_t>(h));
      for (int64_t c = 0; c < h; ++c) xr[c] = p.x[row * h + c].f();
      const std::vector<double> gu =
          Fp8RowMatVec(r.gu_codes, r.gu_scale, x, 2 * i, h, Fp8RowRoundTrip(xr));
      std::vector<double> a(static_cast<size_t>(i));
      for (int64_t c = 0; c < i; ++c) a[c] = Silu(gu[c]) * gu[i + c];
      const std::vector<double> y =
          Fp8RowMatVec(r.dn_codes, r.dn_scale, x, h, i, Fp8RowRoundTrip(a));
      want.insert(want.end(), y.begin(), y.end());
    }
  return want;
}

// The bf16 experts' y rows [N, H] (MoeExpertsForward on the CPU).
inline std::vector<bf16> MoeBf16Experts(MoeFp8Problem p) {
  const int64_t n = p.offsets.back();
  std::vector<bf16> gu(n * 2 * p.i), act(n * p.i), y(n * p.h);
  const MoeExpertWeights w{TensorView(p.gate_up.data(), DType::kBF16, {p.e, 2 * p.i, p.h}),
                           TensorView(p.down.data(), DType::kBF16, {p.e, p.h, p.i})};
  TANDEM_CHECK_OK(MoeExpertsForward(nullptr, w, p.offsets,
                                    TensorView(p.x.data(), DType::kBF16, {n, p.h}),
                                    TensorView(gu.data(), DType::kBF16, {n, 2 * p.i}),
                                    TensorView(act.data(), DType::kBF16, {n, p.i}),
                                    TensorView(y.data(), DType::kBF16, {n, p.h}), nullptr));
  return y;
}

// ||got - want|| / ||want||.
inline double RelativeL2(const std::vector<bf16>& got, const std::vector<bf16>& want) {
  double err = 0, norm = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    err += std::pow(double(got[k].f()) - want[k].f(), 2);
    norm += std::pow(double(want[k].f()), 2);
  }
  return std::sqrt(err / norm);
}

}  // namespace tandem::kernels::testing
