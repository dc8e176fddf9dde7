// `tandem-bench moe`: the routed expert GEMMs (kernels/moe/experts.h: one cuBLASLt GEMM per
// expert and projection, bucketed rows) at the Qwen3.6-35B-A3B expert shape (256 experts of
// width 512, top-8, hidden 2048) on 16,384 tokens, in TFLOP/s against the dense bf16 8192^3
// GEMM rate of the same run (bar: >= 50%), and the whole MoE block (router GEMM, router,
// permutation, gather, the offsets' host sync, experts, combine) per token.
// Args: --tokens=N --experts=E --topk=K --width=I --hidden=H --iters=N.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/bench_util.h"

#ifdef TANDEM_HAVE_CUDA
#include "kernels/core/device_pools.h"
#include "kernels/moe/moe_layer.h"
#include "kernels/moe/routing.h"
#endif

namespace tandem::bench {
namespace {

#ifdef TANDEM_HAVE_CUDA
using namespace tandem::kernels;

struct MoeBenchShape {
  int64_t tokens = 16384, experts = 256, top_k = 8, width = 512, hidden = 2048;
  int iters = 10;
};

Status RunMoeBench(const MoeBenchShape& s) {
  DevicePools pools;  // outlives every tensor below
  ASSIGN_OR_RETURN(CachingPool * pool, pools.Pool(0));
  ASSIGN_OR_RETURN(std::unique_ptr<GemmContext> gemm, GemmContext::Create(0));
  ASSIGN_OR_RETURN(const double ceiling, GemmCeilingTflops(nullptr));
  std::printf("dense bf16 8192^3 GEMM: %.1f TFLOP/s\n", ceiling);

  const int64_t t = s.tokens, n = t * s.top_k, h = s.hidden, i = s.width;
  const MoeLayerShape shape{h, s.experts, s.top_k, i, 0, true};
  ASSIGN_OR_RETURN(Tensor x, RandomBf16(*pool, {t, h}, 1.f, 1, nullptr));
  ASSIGN_OR_RETURN(Tensor hidden, RandomBf16(*pool, {t, h}, 1.f, 2, nullptr));
  const float wb = 1.f / std::sqrt(static_cast<float>(h));
  ASSIGN_OR_RETURN(Tensor router, RandomBf16(*pool, {s.experts, h}, wb, 3, nullptr));
  ASSIGN_OR_RETURN(Tensor gate_up, RandomBf16(*pool, {s.experts, 2 * i, h}, wb, 4, nullptr));
  ASSIGN_OR_RETURN(Tensor down, RandomBf16(*pool, {s.experts, h, i}, wb, 5, nullptr));
  const MoeLayerWeights w{router, {gate_up, down}, {}, {}, {}};
  ASSIGN_OR_RETURN(std::unique_ptr<MoeLayer> layer, MoeLayer::Create(shape, t, *pool, nullptr));

  // The routing of these tokens (one block forward), then its offsets on the host.
  RETURN_IF_ERROR(layer->Forward(gemm.get(), w, x, hidden, nullptr));
  ASSIGN_OR_RETURN(Tensor offsets_d, Tensor::Empty(*pool, DType::kI32, {s.experts + 1}));
  ASSIGN_OR_RETURN(Tensor perm, Tensor::Empty(*pool, DType::kI32, {n}));
  ASSIGN_OR_RETURN(Tensor rows, Tensor::Empty(*pool, DType::kI32, {n}));
  RETURN_IF_ERROR(MoePermute(offsets_d, perm, rows, layer->topk_ids(t), nullptr));
  std::vector<int32_t> offsets(static_cast<size_t>(s.experts + 1));
  RETURN_IF_ERROR(CopyToHost(offsets.data(), offsets_d, nullptr));
  RETURN_IF_ERROR(SynchronizeStream(Device::Cuda(0), nullptr));
  int64_t most = 0, idle = 0;
  for (int64_t e = 0; e < s.experts; ++e) {
    most = std::max<int64_t>(most, offsets[e + 1] - offsets[e]);
    idle += offsets[e + 1] == offsets[e];
  }
  std::printf("routing: %ld tokens x top-%ld over %ld experts: %ld rows per expert on average, "
              "%ld at most, %ld experts idle\n", t, s.top_k, s.experts, n / s.experts, most, idle);

  const int64_t p = MoePaddedRows(n);
  ASSIGN_OR_RETURN(Tensor xp, RandomBf16(*pool, {p, h}, 1.f, 6, nullptr));
  ASSIGN_OR_RETURN(Tensor gu, Tensor::Empty(*pool, DType::kBF16, {p, 2 * i}));
  ASSIGN_OR_RETURN(Tensor act, Tensor::Empty(*pool, DType::kBF16, {p, i}));
  ASSIGN_OR_RETURN(Tensor y, Tensor::Empty(*pool, DType::kBF16, {p, h}));
  ASSIGN_OR_RETURN(const double experts_ms, TimeMs(nullptr, s.iters, 2, [&] {
    return MoeExpertsForward(gemm.get(), {gate_up, down}, offsets, xp, gu, act, y, nullptr);
  }));
  const double flops = 2.0 * static_cast<double>(n) * 3.0 * static_cast<double>(i * h);
  const double rate = flops / experts_ms * 1e-9;
  std::printf("expert GEMMs (per-expert cuBLASLt loop, %ld GEMMs): %.3f ms, %.1f TFLOP/s = "
              "%.1f%% of the dense rate (bar 50%%) (SwiGLU included, %.0f GFLOP)\n",
              2 * (s.experts - idle), experts_ms, rate, 100.0 * rate / ceiling, flops * 1e-9);

  ASSIGN_OR_RETURN(const double block_ms, TimeMs(nullptr, s.iters, 2, [&] {
    return layer->Forward(gemm.get(), w, x, hidden, nullptr);
  }));
  const double block_flops = flops + 2.0 * static_cast<double>(t * s.experts * h);
  std::printf("whole MoE block (router .. combine, one host sync): %.3f ms, %.1f TFLOP/s, "
              "%.1f us per 1k tokens\n", block_ms, block_flops / block_ms * 1e-9,
              block_ms * 1e3 / (static_cast<double>(t) / 1e3));
  return Status::Ok();
}
#endif

int RunMoe(const std::vector<std::string>& args) {
#ifdef TANDEM_HAVE_CUDA
  MoeBenchShape s;
  for (const std::string& a : args) {
    auto value = [&](const char* flag) { return std::stoll(a.substr(std::string(flag).size())); };
    if (a.rfind("--tokens=", 0) == 0) s.tokens = value("--tokens=");
    else if (a.rfind("--experts=", 0) == 0) s.experts = value("--experts=");
    else if (a.rfind("--topk=", 0) == 0) s.top_k = value("--topk=");
    else if (a.rfind("--width=", 0) == 0) s.width = value("--width=");
    else if (a.rfind("--hidden=", 0) == 0) s.hidden = value("--hidden=");
    else if (a.rfind("--iters=", 0) == 0) s.iters = static_cast<int>(value("--iters="));
    else {
      std::fprintf(stderr, "moe bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  const Status st = RunMoeBench(s);
  if (!st.ok()) {
    std::fprintf(stderr, "moe bench: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
#else
  (void)args;
  std::printf("moe bench: needs a CUDA build\n");
  return 0;
#endif
}

TANDEM_BENCH("moe", "experts", "MoE expert GEMMs and block at the 35B-A3B shape vs dense bf16",
             RunMoe);

}  // namespace
}  // namespace tandem::bench
