// `tandem-bench kernels` section "elementwise": the memory-bound ops at Qwen3-8B shapes
// (16384 tokens x hidden 4096, 32/8 heads of 128, intermediate 12288; drafter rows
// 512 x 16 = 8192), each as achieved GB/s (bytes each op must read + write, once) next to a
// 1 GiB cudaMemcpyAsync device-to-device copy timed in the same run (2 GiB moved) and the
// PyTorch peer (bench/kernels_peer_elementwise.py), which runs when `import torch` works.
// Bar: >= 75% of the copy's GB/s. Args: --no-peer, --iters=N, --peer=PATH.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/bench_util.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/elementwise/concat_noise.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/elementwise/embedding.h"
#include "kernels/core/device_pools.h"
#include "kernels/core/memory.h"
#include "kernels/norm/rmsnorm.h"
#include "kernels/rope/rope.h"
#include "kernels/core/stream.h"
#include "kernels/mlp/swiglu.h"
#endif

namespace tandem::bench {
namespace {

#ifdef TANDEM_HAVE_CUDA
using namespace tandem::kernels;

constexpr int64_t kT = 16384, kH = 4096, kHq = 32, kHk = 8, kD = 128, kI = 12288, kR = 8192;
constexpr int64_t kVocab = 151936, kLayers = 5;

struct Row {
  std::string name, shape;
  double bytes, ms;
};

Status Run(const std::vector<std::string>& args) {
  bool peer = true;
  int iters = 20;
  std::string peer_path = std::string(TANDEM_BENCH_DIR) + "/kernels_peer_elementwise.py";
  for (const std::string& a : args) {
    if (a == "--no-peer") peer = false;
    if (a.rfind("--iters=", 0) == 0) iters = std::stoi(a.substr(8));
    if (a.rfind("--peer=", 0) == 0) peer_path = a.substr(7);
  }
  nlohmann::json pj = peer ? RunPeer(peer_path, "", "torch") : nlohmann::json{};

  DevicePools pools;  // outlives every tensor below
  ASSIGN_OR_RETURN(CachingPool * pool, pools.Pool(0));
  ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create(0));
  Stream s = stream.get();
  auto empty = [&](DType t, Shape shape) { return Tensor::Empty(*pool, t, shape, s); };
  // Random bf16 in [-2, 2) made on the device.
  auto random = [&](Shape shape, uint64_t seed) { return RandomBf16(*pool, shape, 2.f, seed, s); };

  std::vector<Row> rows;
  auto bench = [&](const char* name, std::string shape, double bytes,
                   const std::function<Status()>& fn) -> Status {
    ASSIGN_OR_RETURN(double ms, TimeMs(s, iters, 3, fn));
    rows.push_back(Row{name, std::move(shape), bytes, ms});
    return Status::Ok();
  };

  double copy_gbs = 0;
  {
    const int64_t n = int64_t{1} << 30;
    ASSIGN_OR_RETURN(Tensor src, empty(DType::kU8, {n}));
    ASSIGN_OR_RETURN(Tensor dst, empty(DType::kU8, {n}));
    RETURN_IF_ERROR(bench("copy_d2d", "1 GiB", 2.0 * n, [&] {
      if (cudaMemcpyAsync(dst.data(), src.data(), n, cudaMemcpyDeviceToDevice, s) != cudaSuccess)
        return InternalError("cudaMemcpyAsync failed");
      return Status::Ok();
    }));
    copy_gbs = rows.back().bytes / rows.back().ms / 1e6;
  }
  const double b2 = 2.0;  // bytes per bf16
  {
    ASSIGN_OR_RETURN(Tensor x, random({kT, kH}, 1));
    ASSIGN_OR_RETURN(Tensor w, random({kH}, 2));
    ASSIGN_OR_RETURN(Tensor y, empty(DType::kBF16, {kT, kH}));
    ASSIGN_OR_RETURN(Tensor rstd, empty(DType::kF32, {kT}));
    RETURN_IF_ERROR(bench("rmsnorm_fwd", "[16384, 4096]", 2 * b2 * kT * kH,
                          [&] { return RmsNormForward(y, rstd, x, w, 1e-6f, s); }));
    ASSIGN_OR_RETURN(Tensor other, random({kT, kH}, 3));
    RETURN_IF_ERROR(bench("residual_add", "[16384, 4096]", 3 * b2 * kT * kH,
                          [&] { return ResidualAdd(y, x, other, s); }));
    ASSIGN_OR_RETURN(Tensor xf, empty(DType::kF32, {kT, kH}));
    RETURN_IF_ERROR(
        bench("cast_bf16_f32", "[16384, 4096]", 6.0 * kT * kH, [&] { return Cast(xf, x, s); }));
    RETURN_IF_ERROR(
        bench("cast_f32_bf16", "[16384, 4096]", 6.0 * kT * kH, [&] { return Cast(y, xf, s); }));
  }
  {
    ASSIGN_OR_RETURN(Tensor x, random({kR, kH}, 4));
    ASSIGN_OR_RETURN(Tensor dy, random({kR, kH}, 5));
    ASSIGN_OR_RETURN(Tensor w, random({kH}, 6));
    ASSIGN_OR_RETURN(Tensor y, empty(DType::kBF16, {kR, kH}));
    ASSIGN_OR_RETURN(Tensor dx, empty(DType::kBF16, {kR, kH}));
    ASSIGN_OR_RETURN(Tensor rstd, empty(DType::kF32, {kR}));
    ASSIGN_OR_RETURN(Tensor dw, Tensor::Zeros(*pool, DType::kF32, {kH}, s));
    ASSIGN_OR_RETURN(Tensor ws, empty(DType::kF32, {RmsNormBackwardWorkspaceRows(), kH}));
    RETURN_IF_ERROR(RmsNormForward(y, rstd, x, w, 1e-6f, s));
    RETURN_IF_ERROR(bench("rmsnorm_bwd", "[8192, 4096]", 3 * b2 * kR * kH,
                          [&] { return RmsNormBackward(dx, dw, dy, x, w, rstd, ws, s); }));
  }
  {
    ASSIGN_OR_RETURN(Tensor q, random({kT, kHq, kD}, 7));
    ASSIGN_OR_RETURN(Tensor k, random({kT, kHk, kD}, 8));
    ASSIGN_OR_RETURN(Tensor wd, random({kD}, 9));
    ASSIGN_OR_RETURN(Tensor qo, empty(DType::kBF16, {kT, kHq, kD}));
    ASSIGN_OR_RETURN(Tensor ko, empty(DType::kBF16, {kT, kHk, kD}));
    RETURN_IF_ERROR(bench("rmsnorm_head_fwd", "[16384, 32, 128]", 2 * b2 * kT * kHq * kD,
                          [&] { return RmsNormForward(qo, TensorView(), q, wd, 1e-6f, s); }));
    std::vector<int32_t> hpos(kT);
    for (int64_t i = 0; i < kT; ++i) hpos[i] = static_cast<int32_t>(i);
    ASSIGN_OR_RETURN(Tensor pos, empty(DType::kI32, {kT}));
    RETURN_IF_ERROR(CopyFromHost(pos, hpos.data(), s));
    const RopeConfig cfg{kD, 1e6};
    RETURN_IF_ERROR(bench("rope_fwd_qk", "q [16384,32,128] + k [16384,8,128]",
                          2 * b2 * kT * (kHq + kHk) * kD, [&] {
                            RETURN_IF_ERROR(RopeForward(qo, q, pos, cfg, s));
                            return RopeForward(ko, k, pos, cfg, s);
                          }));
    RETURN_IF_ERROR(SynchronizeStream(Device::Cuda(0), s));  // hpos outlives the copy
  }
  {
    ASSIGN_OR_RETURN(Tensor gu, random({kT, 2 * kI}, 10));
    ASSIGN_OR_RETURN(Tensor out, empty(DType::kBF16, {kT, kI}));
    auto [g, u] = SplitGateUp(gu);
    RETURN_IF_ERROR(bench("swiglu_fwd", "[16384, 2x12288] fused", 3 * b2 * kT * kI,
                          [&] { return SwiGluForward(out, g, u, s); }));
  }
  {
    ASSIGN_OR_RETURN(Tensor gu, random({kR, 2 * kI}, 11));
    ASSIGN_OR_RETURN(Tensor dout, random({kR, kI}, 12));
    ASSIGN_OR_RETURN(Tensor dgu, empty(DType::kBF16, {kR, 2 * kI}));
    auto [g, u] = SplitGateUp(gu);
    auto [dg, du] = SplitGateUp(dgu);
    RETURN_IF_ERROR(bench("swiglu_bwd", "[8192, 2x12288] fused", 5 * b2 * kR * kI,
                          [&] { return SwiGluBackward(dg, du, dout, g, u, s); }));
  }
  {
    ASSIGN_OR_RETURN(Tensor table, random({kVocab, kH}, 13));
    std::vector<int32_t> hids(kT);
    for (int64_t i = 0; i < kT; ++i) hids[i] = static_cast<int32_t>((i * 2654435761u) % kVocab);
    ASSIGN_OR_RETURN(Tensor ids, empty(DType::kI32, {kT}));
    RETURN_IF_ERROR(CopyFromHost(ids, hids.data(), s));
    ASSIGN_OR_RETURN(Tensor out, empty(DType::kBF16, {kT, kH}));
    RETURN_IF_ERROR(bench("embedding", "[16384] from [151936, 4096]", 2 * b2 * kT * kH,
                          [&] { return EmbeddingForward(out, ids, table, s); }));
    RETURN_IF_ERROR(SynchronizeStream(Device::Cuda(0), s));
  }
  {
    std::vector<Tensor> layers;
    std::vector<TensorView> views;
    for (int64_t i = 0; i < kLayers; ++i) {
      ASSIGN_OR_RETURN(Tensor l, random({kT, kH}, 20 + i));
      views.push_back(l.view());
      layers.push_back(std::move(l));
    }
    ASSIGN_OR_RETURN(Tensor out, empty(DType::kBF16, {kT, kLayers * kH}));
    uint64_t step = 0;
    RETURN_IF_ERROR(bench("concat_noise", "5 x [16384, 4096] -> [16384, 20480]",
                          2 * b2 * kLayers * kT * kH,
                          [&] { return ConcatNoiseForward(out, views, 0.05f, 1, step++, s); }));
  }
  RETURN_IF_ERROR(stream.Synchronize());

  std::printf("%-17s %-36s %9s %9s %8s %10s %9s  %s\n", "op", "shape", "ms", "GB/s", "%copy",
              "torch ms", "vs torch", "bar>=75%");
  for (const Row& r : rows) {
    const double gbs = r.bytes / r.ms / 1e6, pct = 100.0 * gbs / copy_gbs;
    std::string torch_ms = "-", ratio = "-";
    if (pj.contains(r.name)) {
      const double t = pj[r.name].get<double>();
      torch_ms = fmt::format("{:.3f}", t);
      ratio = fmt::format("{:.2f}x", t / r.ms);
    }
    const bool is_copy = r.name == "copy_d2d";
    std::printf("%-17s %-36s %9.3f %9.1f %7.1f%% %10s %9s  %s\n", r.name.c_str(), r.shape.c_str(),
                r.ms, gbs, pct, torch_ms.c_str(), ratio.c_str(),
                is_copy ? "(ceiling)" : (pct >= 75.0 ? "ok" : "BELOW"));
  }
  std::printf(
      "GB/s counts the bytes each op must read and write once; copy moves 2 x 1 GiB.\n"
      "vs torch = torch ms / tandem ms (> 1: tandem faster). pool: %s\n",
      pool->stats().ToString().c_str());
  return Status::Ok();
}
#endif

int RunElementwise(const std::vector<std::string>& args) {
#ifdef TANDEM_HAVE_CUDA
  return RunGpuSection("elementwise", [&] { return Run(args); });
#else
  (void)args;
  return RunGpuSection("elementwise", {});
#endif
}

}  // namespace

TANDEM_BENCH("kernels", "elementwise",
             "RMSNorm, RoPE, SwiGLU, add, cast, embedding, concat+noise vs D2D copy and PyTorch",
             RunElementwise);

}  // namespace tandem::bench
