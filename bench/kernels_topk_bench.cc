// `tandem-bench kernels` section "row_topk": DFlash2's row top-k of transformed logits
// (kernels/dflash2/row_topk.h, the selector's candidates) on one LM head chunk of the 27B
// drafter (2048 rows of vocab 248320 bf16 logits), k = 16, without and with the soft cap, as
// GB/s of one read of the logits next to a device-to-device copy of the same bytes in the
// same run, on two kinds of rows: normal logits (sigma 2; 64 distinct rows drawn on the
// host, repeated), where the top values are sparse, and uniform ones in [-8, 8), where a few
// hundred logits tie at the top bf16 value of each row. One read is the floor; the kernel
// reads a row once, twice where a thread holds more than four candidates (row_topk.cu).
// Args: --iters=N.
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/bench_util.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/core/device_pools.h"
#include "kernels/core/memory.h"
#include "kernels/core/stream.h"
#include "kernels/dflash2/row_topk.h"
#endif

namespace tandem::bench {
namespace {

#ifdef TANDEM_HAVE_CUDA
using namespace tandem::kernels;

constexpr int64_t kRows = 2048, kVocab = 248320, kK = 16;

Status Run(const std::vector<std::string>& args) {
  int iters = 20;
  for (const std::string& a : args)
    if (a.rfind("--iters=", 0) == 0) iters = std::stoi(a.substr(8));
  DevicePools pools;  // outlives every tensor below
  ASSIGN_OR_RETURN(CachingPool * pool, pools.Pool(0));
  ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create(0));
  Stream s = stream.get();
  ASSIGN_OR_RETURN(Tensor uniform, RandomBf16(*pool, {kRows, kVocab}, 8.f, 11, s));
  ASSIGN_OR_RETURN(Tensor normal, Tensor::Empty(*pool, DType::kBF16, {kRows, kVocab}, s));
  {
    constexpr int64_t kDistinct = 64;
    std::vector<bf16> host(static_cast<size_t>(kDistinct * kVocab));
    std::mt19937 gen(5);
    std::normal_distribution<float> nd(0.f, 2.f);
    for (bf16& b : host) b = bf16(nd(gen));
    const int64_t block = kDistinct * kVocab * 2;
    for (int64_t r = 0; r < kRows; r += kDistinct)
      if (cudaMemcpyAsync(static_cast<char*>(normal.data()) + r * kVocab * 2, host.data(), block,
                          cudaMemcpyHostToDevice, s) != cudaSuccess)
        return InternalError("row_topk bench: uploading the normal logits failed");
    RETURN_IF_ERROR(stream.Synchronize());
  }
  ASSIGN_OR_RETURN(Tensor ids, Tensor::Empty(*pool, DType::kI32, {kRows, kK}, s));
  ASSIGN_OR_RETURN(Tensor values, Tensor::Empty(*pool, DType::kF32, {kRows, kK}, s));
  const int64_t bytes = kRows * kVocab * 2;
  ASSIGN_OR_RETURN(Tensor half, Tensor::Empty(*pool, DType::kU8, {bytes / 2}, s));
  ASSIGN_OR_RETURN(double copy_ms, TimeMs(s, iters, 3, [&] {
                     if (cudaMemcpyAsync(half.data(), uniform.data(), bytes / 2,
                                         cudaMemcpyDeviceToDevice, s) != cudaSuccess)
                       return InternalError("cudaMemcpyAsync failed");
                     return Status::Ok();
                   }));
  std::printf("row top-k: %lld rows of %lld bf16 logits (%.0f MB), k %lld\n",
              static_cast<long long>(kRows), static_cast<long long>(kVocab), bytes / 1e6,
              static_cast<long long>(kK));
  std::printf("%-22s %9s %9s %12s %8s\n", "op", "ms", "GB/s", "copy GB/s", "reads");
  const double copy_gbs = bytes / copy_ms / 1e6;
  for (const auto& [name, logits] : {std::pair<const char*, const Tensor*>{"normal", &normal},
                                     std::pair<const char*, const Tensor*>{"uniform", &uniform}})
    for (float softcap : {0.f, 30.f}) {
      ASSIGN_OR_RETURN(double ms, TimeMs(s, iters, 3, [&] {
                         return dflash2::RowTopK(ids, values, *logits, 1.f, softcap, s);
                       }));
      const double gbs = bytes / ms / 1e6;
      const std::string op = std::string(name) + (softcap > 0 ? ", softcap 30" : "");
      std::printf("%-22s %9.3f %9.1f %12.1f %8.2f\n", op.c_str(), ms, gbs, copy_gbs,
                  copy_gbs / gbs);
    }
  std::printf("reads: the time in copies of the logits' bytes (one read + one write each).\n");
  return stream.Synchronize();
}
#endif

int RunRowTopK(const std::vector<std::string>& args) {
#ifdef TANDEM_HAVE_CUDA
  return RunGpuSection("row_topk", [&] { return Run(args); });
#else
  (void)args;
  return RunGpuSection("row_topk", {});
#endif
}

}  // namespace

TANDEM_BENCH("kernels", "row_topk",
             "DFlash2 row top-k of one 27B LM head chunk's logits vs a D2D copy", RunRowTopK);

}  // namespace tandem::bench
