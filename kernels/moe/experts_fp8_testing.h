// Test-only utilities of the FP8 expert path (experts_fp8.h): a problem (bf16 experts, rows
// laid out by offsets), running MoeFp8ExpertsForward on either device from host copies, and
// a float64 reference of its definition (weights and activations dequantized from their
// e4m3 codes, products summed in float64, gate|up and act rounded to bf16 as the path
// stores them).
// Thread-safety: free functions on caller-owned data.
#pragma once

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

// The FP8 path on `alloc`'s device (gemm: its context, null on the CPU): quantizes the
// experts there, runs the forward, returns y's first N rows and the quantized experts' codes
// and scales (for the reference).
struct MoeFp8Result {
  std::vector<bf16> y;
  std::vector<uint8_t> gu_codes, dn_codes;
  std::vector<float> gu_scale, dn_scale;
};

inline MoeFp8Result RunMoeFp8Experts(Allocator& alloc, GemmContext* gemm, MoeFp8Problem& p) {
  const int64_t e = p.e, h = p.h, i = p.i, n = p.offsets.back();
  Tensor gu = MakeTensor<bf16>(alloc, DType::kBF16, {e, 2 * i, h}, p.gate_up);
  Tensor dn = MakeTensor<bf16>(alloc, DType::kBF16, {e, h, i}, p.down);
  const int64_t rows = MoeFp8BufferRows(n, e), py = MoePaddedRows(n);
  std::vector<bf16> xpad(static_cast<size_t>(py * h), bf16(0.f));
  std::copy(p.x.begin(), p.x.end(), xpad.begin());
  Tensor x = MakeTensor<bf16>(alloc, DType::kBF16, {py, h}, xpad);
  Tensor off = MakeTensor<int32_t>(alloc, DType::kI32, {e + 1}, p.offsets);
  Result<Tensor> w8 = Tensor::Empty(alloc, DType::kU8, {MoeFp8ExpertBytes(e, i, h)});
  Result<Tensor> ws = Tensor::Empty(alloc, DType::kU8, {MoeFp8WorkspaceBytes(n, e, h, i)});
  Result<Tensor> gate_up = Tensor::Empty(alloc, DType::kBF16, {rows, 2 * i});
  Result<Tensor> act = Tensor::Empty(alloc, DType::kBF16, {rows, i});
  TANDEM_CHECK_OK(w8.status());
  TANDEM_CHECK_OK(ws.status());
  TANDEM_CHECK_OK(gate_up.status());
  TANDEM_CHECK_OK(act.status());
  int64_t o1 = 0, o2 = 0;
  const MoeFp8ExpertWeights w =
      CarveMoeFp8Experts(w8->data(), &o1, e, i, h, alloc.device());
  const MoeFp8Workspace work =
      CarveMoeFp8Workspace(ws->data(), &o2, n, e, h, i, alloc.device());
  TANDEM_CHECK_OK(QuantizeMoeFp8Experts({gu.view(), dn.view()}, w, nullptr));
  // y aliases x, as MoeLayer runs it.
  TANDEM_CHECK_OK(MoeFp8ExpertsForward(gemm, w, p.offsets, off.view(), work, x.view(),
                                       gate_up->view(), act->view(), x.view(), nullptr));
  MoeFp8Result r;
  r.y = ToHost<bf16>(x.view().Narrow(0, 0, n));
  r.gu_codes = ToHost<uint8_t>(w.gate_up);
  r.dn_codes = ToHost<uint8_t>(w.down);
  r.gu_scale = ToHost<float>(w.gate_up_scale);
  r.dn_scale = ToHost<float>(w.down_scale);
  return r;
}

// v quantized per 128-element group and dequantized (the path's activation rounding).
inline std::vector<double> Fp8RoundTrip(const std::vector<double>& v) {
  std::vector<double> out(v.size());
  for (size_t c0 = 0; c0 < v.size(); c0 += 128) {
    const size_t c1 = std::min(v.size(), c0 + 128);
    float amax = 0.f;
    for (size_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(static_cast<float>(v[c])));
    const float s = amax > 0.f ? amax / kE4m3Max : 1.f;
    for (size_t c = c0; c < c1; ++c)
      out[c] = static_cast<double>(E4m3ToFloat(FloatToE4m3(static_cast<float>(v[c]) / s))) * s;
  }
  return out;
}

// W (expert `x` of codes [E, rows, cols], scales [E, ceil(rows/128), ld]) times v, float64.
inline std::vector<double> Fp8MatVec(const std::vector<uint8_t>& codes,
                                     const std::vector<float>& scale, int64_t x, int64_t rows,
                                     int64_t cols, const std::vector<double>& v) {
  const int64_t ld = Fp8WeightScaleLd(cols), nb = Fp8Blocks(rows);
  std::vector<double> out(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r] += static_cast<double>(E4m3ToFloat(codes[(x * rows + r) * cols + c])) *
                scale[(x * nb + r / 128) * ld + c / 128] * v[c];
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
      std::vector<double> gu = Fp8MatVec(r.gu_codes, r.gu_scale, x, 2 * i, h, Fp8RoundTrip(xr));
      for (double& g : gu) g = bf16(static_cast<float>(g)).f();
      std::vector<double> a(static_cast<size_t>(i));
      for (int64_t c = 0; c < i; ++c) a[c] = bf16(static_cast<float>(Silu(gu[c]) * gu[i + c])).f();
      const std::vector<double> y = Fp8MatVec(r.dn_codes, r.dn_scale, x, h, i, Fp8RoundTrip(a));
      want.insert(want.end(), y.begin(), y.end());
    }
  return want;
}

}  // namespace tandem::kernels::testing
