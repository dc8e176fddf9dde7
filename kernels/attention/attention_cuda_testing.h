// Helpers shared by the attention GPU tests (attention_gpu_test, dflash_mma_gpu_test,
// dflash_wgmma_gpu_test): NaN-poisoned device buffers, host views, a closeness check that
// names the worst element as (row, head, dim), and the DFlash plan on this device. Test-only:
// uses gtest and the CUDA runtime; include only from tests built with TANDEM_HAVE_CUDA.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_testing.h"
#include "kernels/attention/dflash_path.h"
#include "kernels/attention/dflash_plan.h"
#include "kernels/core/device_props.h"
#include "kernels/core/tensor.h"

namespace tandem::kernels::attention_testing {

// A device copy of `host` (or n NaN elements), freed on destruction.
template <typename T>
class DevBuf {
 public:
  explicit DevBuf(const std::vector<T>& host) : n_(host.size()) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p_), std::max<size_t>(n_, 1) * sizeof(T)),
              cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  explicit DevBuf(size_t n) : DevBuf(NanFilled(n)) {}
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() { cudaFree(p_); }
  std::vector<T> ToHost() const {
    std::vector<T> h(n_);
    EXPECT_EQ(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
  TensorView View(DType t, Shape s) const { return TensorView(p_, t, s, Device::Cuda(0)); }

 private:
  static std::vector<T> NanFilled(size_t n) {
    std::vector<T> h(n);
    std::memset(static_cast<void*>(h.data()), 0xff, n * sizeof(T));  // NaN (bf16, f32)
    return h;
  }
  T* p_ = nullptr;
  size_t n_;
};

inline TensorView Host(std::vector<bf16>& v, Shape s) {
  return TensorView(v.data(), DType::kBF16, s);
}
inline TensorView Host(std::vector<float>& v, Shape s) {
  return TensorView(v.data(), DType::kF32, s);
}
inline TensorView Host(std::vector<int32_t>& v, Shape s) {
  return TensorView(v.data(), DType::kI32, s);
}

// "what: max |err| ... at (row r, head h, dim c)" for a [rows, heads, inner] tensor.
template <typename A, typename B>
void ExpectClose(const char* what, const std::vector<A>& got, const std::vector<B>& want,
                 int64_t heads, int64_t inner, double atol, double rtol) {
  const CloseReport r = Compare(got, want, atol, rtol);
  const int64_t i = std::max<int64_t>(r.worst, 0);
  EXPECT_TRUE(r.ok) << r.ToString(what)
                    << fmt::format(" = (row {}, head {}, dim {})", i / (heads * inner),
                                   (i / inner) % heads, i % inner);
}

// One DFlash block-attention case: documents, blocks, heads, head dim, window, in-block causal.
struct DFlashCase {
  std::vector<int> lens;
  int nb, hq, hk, d, window;
  bool causal;
};

inline std::string DFlashCaseName(const DFlashCase& c) {
  return fmt::format("docs{} nb{} h{}/{} d{} w{} causal{}", c.lens.size(), c.nb, c.hq, c.hk, c.d,
                     c.window, c.causal);
}

// The plan the entry points make for `path` on this device for a (hq, hk, head_dim) whose
// tensor-core kernels apply (aligned tensors), at softmax scale `scale`.
inline attention_internal::DFlashPlan PlanOnThisDevice(attention_internal::DFlashPath path, int hq,
                                                       int hk, int d, float scale = 1.0f) {
  return attention_internal::SelectDFlashPlan(path, /*mma_applies=*/true, hq / hk, d, scale,
                                              CurrentDeviceComputeCapabilityMajor());
}

// Tolerances. Both sides read the same bf16 inputs and accumulate in fp32; they differ by
// summation order (~1e-6), by where bf16 rounding lands, and (MMA kernels) by rounding P and dS
// to bf16 (relative 2^-9) before the P V, dS K, P^T dO and dS^T Q products, whose terms have
// weights summing to <= 1 (forward) or a few (gradients) and random-sign rounding errors. The
// forward bound: 8e-3 + 1e-2 relative (one bf16 ulp of an O(1) output plus margin); LSE is
// fp32 end to end: 1e-3. Gradients sum ~|context| O(1) terms and dq/dk_blk/dv_blk are rounded
// to bf16: 2e-2 + 2e-2 relative is a few bf16 ulps, while a masking, indexing or fragment-
// layout error changes them at O(0.1) or more.
inline constexpr double kOutTol = 8e-3, kOutRtol = 1e-2, kLseTol = 1e-3, kGradTol = 2e-2;

// Runs case `c` forward and backward on the CPU reference and on CUDA through `path`
// (outputs NaN-poisoned) and expects every output and gradient close. Inputs are drawn from
// `seed` (layout) and seed+1.. (tensors). With `split`, the backward gets the delta scratch
// (the MMA path then runs the key-major context kernel), and a second backward must give
// bitwise the same context gradients (no atomics: a fixed summation order).
inline void CheckDFlashCase(const DFlashCase& c, attention_internal::DFlashPath path,
                            uint64_t seed, bool split = false) {
  DFlashLayout lay = MakeDFlashLayout(c.lens, c.nb, seed);
  const int64_t t = lay.t, rows = int64_t{c.nb} * kDFlashBlockSize;
  auto q = RandomBf16(rows * c.hq * c.d, seed + 1), kb = RandomBf16(rows * c.hk * c.d, seed + 2),
       vb = RandomBf16(rows * c.hk * c.d, seed + 3), kc = RandomBf16(t * c.hk * c.d, seed + 4),
       vc = RandomBf16(t * c.hk * c.d, seed + 5), dout = RandomBf16(rows * c.hq * c.d, seed + 6);
  const DFlashAttentionConfig cfg{c.window, c.causal, 0.0f};
  const Shape qs{rows, c.hq, c.d}, bs{rows, c.hk, c.d}, cs{t, c.hk, c.d}, ls{rows, c.hq};

  // CPU reference.
  DFlashAttentionInputs hin{Host(q, qs), Host(kb, bs), Host(vb, bs), Host(kc, cs), Host(vc, cs),
                            Host(lay.anchors, {c.nb}), Host(lay.doc_start, {c.nb})};
  std::vector<bf16> out(q.size()), dq(q.size()), dkb(kb.size()), dvb(vb.size());
  std::vector<float> lse(rows * c.hq), dkc(kc.size()), dvc(vc.size());
  ASSERT_TRUE(DFlashAttentionForwardCpu(hin, cfg, Host(out, qs), Host(lse, ls)).ok());
  ASSERT_TRUE(DFlashAttentionBackwardCpu(
                  hin, cfg, Host(out, qs), Host(lse, ls), Host(dout, qs),
                  {Host(dq, qs), Host(dkb, bs), Host(dvb, bs), Host(dkc, cs), Host(dvc, cs), TensorView()})
                  .ok());

  // CUDA.
  DevBuf<bf16> gq(q), gkb(kb), gvb(vb), gkc(kc), gvc(vc), gdout(dout);
  DevBuf<int32_t> ganc(lay.anchors), gds(lay.doc_start);
  DevBuf<bf16> gout(q.size()), gdq(q.size()), gdkb(kb.size()), gdvb(vb.size());
  DevBuf<float> glse(lse.size()), gdkc(kc.size()), gdvc(vc.size());
  const auto bf = DType::kBF16, f32 = DType::kF32;
  DFlashAttentionInputs din{gq.View(bf, qs),  gkb.View(bf, bs), gvb.View(bf, bs),
                            gkc.View(bf, cs), gvc.View(bf, cs), ganc.View(DType::kI32, {c.nb}),
                            gds.View(DType::kI32, {c.nb})};
  Status s = attention_internal::DFlashAttentionForwardPath(path, din, cfg, gout.View(bf, qs),
                                                            glse.View(f32, ls), nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  DevBuf<float> gdelta(split ? lse.size() : 0), gdkc2(split ? kc.size() : 0),
      gdvc2(split ? vc.size() : 0);
  const TensorView delta = split ? gdelta.View(f32, ls) : TensorView();
  auto backward = [&](DevBuf<float>& dkc_out, DevBuf<float>& dvc_out) {
    return attention_internal::DFlashAttentionBackwardPath(
        path, din, cfg, gout.View(bf, qs), glse.View(f32, ls), gdout.View(bf, qs),
        {gdq.View(bf, qs), gdkb.View(bf, bs), gdvb.View(bf, bs), dkc_out.View(f32, cs),
         dvc_out.View(f32, cs), delta},
        nullptr);
  };
  s = backward(gdkc, gdvc);
  ASSERT_TRUE(s.ok()) << s.ToString();
  if (split) {
    s = backward(gdkc2, gdvc2);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  if (split) {
    EXPECT_TRUE(gdkc.ToHost() == gdkc2.ToHost()) << "dk_ctx differs between two runs";
    EXPECT_TRUE(gdvc.ToHost() == gdvc2.ToHost()) << "dv_ctx differs between two runs";
  }

  ExpectClose("out", ToFloat(gout.ToHost()), ToFloat(out), c.hq, c.d, kOutTol, kOutRtol);
  ExpectClose("lse", glse.ToHost(), lse, c.hq, 1, kLseTol, kLseTol);
  ExpectClose("dq_blk", ToFloat(gdq.ToHost()), ToFloat(dq), c.hq, c.d, kGradTol, kGradTol);
  ExpectClose("dk_blk", ToFloat(gdkb.ToHost()), ToFloat(dkb), c.hk, c.d, kGradTol, kGradTol);
  ExpectClose("dv_blk", ToFloat(gdvb.ToHost()), ToFloat(dvb), c.hk, c.d, kGradTol, kGradTol);
  ExpectClose("dk_ctx", gdkc.ToHost(), dkc, c.hk, c.d, kGradTol, kGradTol);
  ExpectClose("dv_ctx", gdvc.ToHost(), dvc, c.hk, c.d, kGradTol, kGradTol);
}

}  // namespace tandem::kernels::attention_testing
