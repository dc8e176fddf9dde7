// `tandem-bench kernels` section "dflash2_conv": DFlash2's grouped dynamic causal convolution
// (kernels/dflash2/dynamic_conv.h) at the 27B drafter's shape (H = 5120, 16384 rows, K = 2
// taps, group 16, blocks of 16 rows), forward (plain and with the fused residual add) and
// backward, each as achieved GB/s (the bytes the op must read and write once: x, y, the d
// side, and for the backward dy, dx, dd) next to a cudaMemcpyAsync device-to-device copy of
// the same bytes timed in the same run. d is one side of a [rows, 2 K G] projection output
// (a strided view), as the drafter passes it. Bar: >= 75% of the copy's rate. Args: --iters=N.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/bench_util.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/core/device_pools.h"
#include "kernels/core/memory.h"
#include "kernels/core/stream.h"
#include "kernels/dflash2/dynamic_conv.h"
#endif

namespace tandem::bench {
namespace {

#ifdef TANDEM_HAVE_CUDA
using namespace tandem::kernels;

constexpr int64_t kRows = 16384, kH = 5120, kTaps = 2, kGroup = 16, kBlock = 16;

struct ConvRow {
  std::string name;
  double bytes, ms, copy_ms;
};

Status Run(const std::vector<std::string>& args) {
  int iters = 20;
  for (const std::string& a : args)
    if (a.rfind("--iters=", 0) == 0) iters = std::stoi(a.substr(8));

  DevicePools pools;  // outlives every tensor below
  ASSIGN_OR_RETURN(CachingPool * pool, pools.Pool(0));
  ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create(0));
  Stream s = stream.get();
  auto empty = [&](DType t, Shape shape) { return Tensor::Empty(*pool, t, shape, s); };
  auto random = [&](Shape shape, uint64_t seed) { return RandomBf16(*pool, shape, 1.f, seed, s); };

  const int64_t g = kH / kGroup, kg = kTaps * g;
  ASSIGN_OR_RETURN(Tensor x, random({kRows, kH}, 1));
  ASSIGN_OR_RETURN(Tensor dy, random({kRows, kH}, 2));
  ASSIGN_OR_RETURN(Tensor base, random({kTaps, kH}, 3));
  ASSIGN_OR_RETURN(Tensor proj, random({kRows, 2 * kg}, 4));  // both sides of d
  ASSIGN_OR_RETURN(Tensor y, empty(DType::kBF16, {kRows, kH}));
  ASSIGN_OR_RETURN(Tensor dx, empty(DType::kBF16, {kRows, kH}));
  ASSIGN_OR_RETURN(Tensor dproj, empty(DType::kBF16, {kRows, 2 * kg}));
  ASSIGN_OR_RETURN(Tensor dbase, Tensor::Zeros(*pool, DType::kF32, {kTaps, kH}, s));
  const int64_t ws_bytes = dflash2::DynamicConvBackwardWorkspaceBytes(kRows, kH, kTaps);
  ASSIGN_OR_RETURN(Tensor ws, empty(DType::kU8, {ws_bytes}));
  const TensorView d = proj.view().Narrow(1, kg, kg), dd = dproj.view().Narrow(1, kg, kg);

  const double act = 2.0 * kRows * kH, side = 2.0 * kRows * kg;  // bytes of x and of d
  // The largest copy below moves 3 act + 2 side bytes: half of that in each buffer.
  const int64_t copy_max = static_cast<int64_t>((3 * act + 2 * side) / 2) + 1;
  ASSIGN_OR_RETURN(Tensor csrc, empty(DType::kU8, {copy_max}));
  ASSIGN_OR_RETURN(Tensor cdst, empty(DType::kU8, {copy_max}));

  std::vector<ConvRow> rows;
  auto bench = [&](const char* name, double bytes, const std::function<Status()>& fn) -> Status {
    ASSIGN_OR_RETURN(double ms, TimeMs(s, iters, 3, fn));
    const int64_t n = static_cast<int64_t>(bytes / 2);  // a copy of n bytes moves 2 n
    ASSIGN_OR_RETURN(double copy_ms, TimeMs(s, iters, 3, [&] {
                       if (cudaMemcpyAsync(cdst.data(), csrc.data(), n, cudaMemcpyDeviceToDevice,
                                           s) != cudaSuccess)
                         return InternalError("cudaMemcpyAsync failed");
                       return Status::Ok();
                     }));
    rows.push_back(ConvRow{name, bytes, ms, copy_ms});
    return Status::Ok();
  };
  RETURN_IF_ERROR(bench("conv_fwd", 2 * act + side, [&] {
    return dflash2::DynamicConvForward(y, x, base, d, kGroup, kBlock, false, s);
  }));
  RETURN_IF_ERROR(bench("conv_fwd_residual", 3 * act + side, [&] {
    return dflash2::DynamicConvForward(y, x, base, d, kGroup, kBlock, true, s);
  }));
  RETURN_IF_ERROR(bench("conv_bwd", 3 * act + 2 * side, [&] {
    return dflash2::DynamicConvBackward(dx, dbase, dd, dy, x, base, d, kGroup, kBlock, ws, s);
  }));
  RETURN_IF_ERROR(stream.Synchronize());

  std::printf(
      "shape: rows %lld, H %lld, K %lld, group %lld, block %lld (d: one side of "
      "[rows, %lld])\n",
      static_cast<long long>(kRows), static_cast<long long>(kH), static_cast<long long>(kTaps),
      static_cast<long long>(kGroup), static_cast<long long>(kBlock),
      static_cast<long long>(2 * kg));
  std::printf("%-18s %9s %9s %9s %9s %8s  %s\n", "op", "MB", "ms", "GB/s", "copy GB/s", "%copy",
              "bar>=75%");
  for (const ConvRow& r : rows) {
    const double gbs = r.bytes / r.ms / 1e6, copy_gbs = r.bytes / r.copy_ms / 1e6;
    const double pct = 100.0 * gbs / copy_gbs;
    std::printf("%-18s %9.1f %9.3f %9.1f %9.1f %7.1f%%  %s\n", r.name.c_str(), r.bytes / 1e6, r.ms,
                gbs, copy_gbs, pct, pct >= 75.0 ? "ok" : "BELOW");
  }
  std::printf(
      "GB/s counts the bytes each op must read and write once (the backward's dbase "
      "partials, %.1f MB each way, not counted); the copy moves the same bytes.\n",
      ws_bytes / 1e6);
  return Status::Ok();
}
#endif

int RunDflash2Conv(const std::vector<std::string>& args) {
#ifdef TANDEM_HAVE_CUDA
  return RunGpuSection("dflash2_conv", [&] { return Run(args); });
#else
  (void)args;
  return RunGpuSection("dflash2_conv", {});
#endif
}

}  // namespace

TANDEM_BENCH("kernels", "dflash2_conv",
             "DFlash2 grouped dynamic conv fwd/bwd at the 27B drafter shape vs D2D copy",
             RunDflash2Conv);

}  // namespace tandem::bench
