// `tandem-bench fp8-algos [--shapes=M:N:K,...] [--algos=N] [--rounds=N]`: does
// cuBLASLt's first heuristic choice leave FP8 rate on the table? For each shape (default: the
// Qwen3-8B projections at 16384 tokens and the 27B MLP) it asks the heuristic for its top
// `algos` (16) block-scaled e4m3 algorithms (1x128 activation / 128x128 weight scales, bf16
// out: the descriptor kernels::cuda::Fp8Gemm builds), then times each in `rounds` (3)
// interleaved rounds of 10 back-to-back calls, so every candidate sees the same power state,
// and prints each one's tile, stages, cluster shape, split-K and TFLOP/s (best round) against
// the first. Random operands from the kernels' own quantizers.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench.h"
#include "runtime/core/status.h"

#ifdef TANDEM_HAVE_CUDA
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "bench/bench_util.h"
#include "kernels/core/device_pools.h"
#include "kernels/core/stream.h"
#include "kernels/gemm/fp8.h"
#endif

namespace tandem::bench {
namespace {

#ifdef TANDEM_HAVE_CUDA

struct Shape3 {
  int64_t m, n, k;
};

#define LT_OK(expr)                                                                        \
  do {                                                                                     \
    const cublasStatus_t st_ = (expr);                                                     \
    if (st_ != CUBLAS_STATUS_SUCCESS) return InternalError("{}: cuBLASLt status {}", #expr, \
                                                           static_cast<int>(st_));          \
  } while (0)

struct LtDesc {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtDesc() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

// y[m, n] = x[m, k] W[n, k]^T as cuBLASLt sees it (column-major): A = W (k x n, transposed),
// B = x (k x m), C = y (n x m); A's scales 128x128 blocks, B's 1x128 groups.
Status Describe(const Shape3& s, const void* w_scale, const void* x_scale, size_t ws,
                LtDesc* d) {
  LT_OK(cublasLtMatmulDescCreate(&d->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  LT_OK(cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t)));
  LT_OK(cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n)));
  const int32_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  const int32_t b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  LT_OK(cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode,
                                       sizeof(a_mode)));
  LT_OK(cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode,
                                       sizeof(b_mode)));
  LT_OK(cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale,
                                       sizeof(w_scale)));
  LT_OK(cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale,
                                       sizeof(x_scale)));
  LT_OK(cublasLtMatrixLayoutCreate(&d->la, CUDA_R_8F_E4M3, s.k, s.n, s.k));
  LT_OK(cublasLtMatrixLayoutCreate(&d->lb, CUDA_R_8F_E4M3, s.k, s.m, s.k));
  LT_OK(cublasLtMatrixLayoutCreate(&d->lc, CUDA_R_16BF, s.n, s.m, s.n));
  LT_OK(cublasLtMatmulPreferenceCreate(&d->pref));
  const uint64_t ws64 = ws;
  LT_OK(cublasLtMatmulPreferenceSetAttribute(d->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &ws64, sizeof(ws64)));
  return Status::Ok();
}

std::string AlgoName(const cublasLtMatmulAlgo_t& a) {
  int tile = 0, stages = 0, split = 0, cluster = 0;
  size_t got = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &got);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages,
                                       sizeof(stages), &got);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof(split),
                                       &got);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster,
                                       sizeof(cluster), &got);
  return fmt::format("tile {:3d} stages {:3d} cluster {:2d} splitK {}", tile, stages, cluster,
                     split);
}

Status SweepShape(cublasLtHandle_t h, const Shape3& s, int algos, int rounds, void* ws,
                  size_t ws_bytes, cudaStream_t stream) {
  kernels::DevicePools pools;
  ASSIGN_OR_RETURN(kernels::CachingPool * pool, pools.Pool(0));
  using kernels::DType;
  ASSIGN_OR_RETURN(kernels::Tensor x, RandomBf16(*pool, {s.m, s.k}, 1.f, 71, stream));
  ASSIGN_OR_RETURN(kernels::Tensor w, RandomBf16(*pool, {s.n, s.k}, 0.02f, 72, stream));
  ASSIGN_OR_RETURN(kernels::Tensor y, kernels::Tensor::Empty(*pool, DType::kBF16, {s.m, s.n}, stream));
  ASSIGN_OR_RETURN(kernels::Tensor xq, kernels::Tensor::Empty(*pool, DType::kF8E4M3, {s.m, s.k}, stream));
  ASSIGN_OR_RETURN(kernels::Tensor xs, kernels::Tensor::Empty(
                                           *pool, DType::kF32, {kernels::Fp8ActScaleElems(s.m, s.k)}, stream));
  ASSIGN_OR_RETURN(kernels::Tensor wq, kernels::Tensor::Empty(*pool, DType::kF8E4M3, {s.n, s.k}, stream));
  ASSIGN_OR_RETURN(kernels::Tensor wsc,
                   kernels::Tensor::Empty(*pool, DType::kF32,
                                          {kernels::Fp8Blocks(s.n), kernels::Fp8WeightScaleLd(s.k)}, stream));
  RETURN_IF_ERROR(kernels::QuantizeFp8Activation(x.view(), {xq.view(), xs.view()}, stream));
  RETURN_IF_ERROR(kernels::QuantizeFp8Weight(w.view(), {wq.view(), wsc.view()}, stream));
  LtDesc d;
  RETURN_IF_ERROR(Describe(s, wsc.view().data(), xs.view().data(), ws_bytes, &d));
  std::vector<cublasLtMatmulHeuristicResult_t> res(algos);
  int found = 0;
  LT_OK(cublasLtMatmulAlgoGetHeuristic(h, d.desc, d.la, d.lb, d.lc, d.lc, d.pref, algos,
                                       res.data(), &found));
  const float alpha = 1.f, beta = 0.f;
  const double flops = 2.0 * s.m * s.n * s.k;
  std::vector<double> best(found, 0.0);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < found; ++i) {
      auto call = [&] {
        return cublasLtMatmul(h, d.desc, &alpha, wq.view().data(), d.la, xq.view().data(), d.lb,
                              &beta, y.view().data(), d.lc, y.view().data(), d.lc, &res[i].algo,
                              ws, ws_bytes, stream);
      };
      if (call() != CUBLAS_STATUS_SUCCESS) continue;  // some candidates refuse at launch
      cudaEventRecord(e0, stream);
      for (int it = 0; it < 10; ++it) call();
      cudaEventRecord(e1, stream);
      cudaEventSynchronize(e1);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      best[i] = std::max(best[i], flops * 10 / ms / 1e9);
    }
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::printf("M %ld N %ld K %ld: %d candidates\n", s.m, s.n, s.k, found);
  for (int i = 0; i < found; ++i)
    std::printf("  #%-2d %s  %8.1f TFLOP/s  %.3fx #0\n", i, AlgoName(res[i].algo).c_str(),
                best[i], best[0] > 0 ? best[i] / best[0] : 0.0);
  return Status::Ok();
}

int RunFp8Algos(const std::vector<std::string>& args) {
  std::vector<Shape3> shapes = {{16384, 4096, 4096},  {16384, 1024, 4096}, {16384, 24576, 4096},
                                {16384, 4096, 12288}, {16384, 34816, 5120}, {16384, 5120, 17408},
                                {8192, 8192, 8192}};
  int algos = 16, rounds = 3;
  for (const std::string& a : args) {
    if (a.rfind("--algos=", 0) == 0) {
      algos = std::stoi(a.substr(8));
    } else if (a.rfind("--rounds=", 0) == 0) {
      rounds = std::stoi(a.substr(9));
    } else if (a.rfind("--shapes=", 0) == 0) {
      shapes.clear();
      std::string rest = a.substr(9);
      while (!rest.empty()) {
        const size_t comma = rest.find(',');
        const std::string one = rest.substr(0, comma);
        Shape3 s{};
        if (std::sscanf(one.c_str(), "%ld:%ld:%ld", &s.m, &s.n, &s.k) != 3) {
          std::fprintf(stderr, "fp8-algos: bad shape '%s' (want M:N:K)\n", one.c_str());
          return 2;
        }
        shapes.push_back(s);
        rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
      }
    } else {
      std::fprintf(stderr, "fp8-algos: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("fp8-algos: skipped (no CUDA device visible)\n");
    return 0;
  }
  cublasLtHandle_t h = nullptr;
  void* ws = nullptr;
  const size_t ws_bytes = 64ull << 20;  // GemmContext's default
  if (cublasLtCreate(&h) != CUBLAS_STATUS_SUCCESS || cudaMalloc(&ws, ws_bytes) != cudaSuccess) {
    std::fprintf(stderr, "fp8-algos: cuBLASLt handle or workspace failed\n");
    return 1;
  }
  auto stream = kernels::CudaStream::Create(0);
  int rc = stream.ok() ? 0 : 1;
  for (const Shape3& s : shapes) {
    if (rc != 0) break;
    const Status st = SweepShape(h, s, algos, rounds, ws, ws_bytes,
                                 static_cast<cudaStream_t>(stream->get()));
    if (!st.ok()) {
      std::fprintf(stderr, "fp8-algos: %s\n", st.ToString().c_str());
      rc = 1;
    }
  }
  cudaFree(ws);
  cublasLtDestroy(h);
  return rc;
}

#else
int RunFp8Algos(const std::vector<std::string>&) {
  std::printf("fp8-algos: built without CUDA; nothing to measure\n");
  return 0;
}
#endif

}  // namespace

TANDEM_BENCH("fp8-algos", "sweep",
             "cuBLASLt's block-scaled FP8 candidates at the targets' projection shapes",
             RunFp8Algos);

}  // namespace tandem::bench
