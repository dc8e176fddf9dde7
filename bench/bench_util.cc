// What the tandem-bench families share; see bench_util.h.
#include "bench/bench_util.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#ifdef TANDEM_HAVE_CUDA
#include <algorithm>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "kernels/core/dtype.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/random/philox.h"
#endif

namespace tandem::bench {

namespace {

// The peer script: `built` if it exists, else bench/NAME of the checkout the bench runs in.
std::string PeerScript(const std::string& built) {
  if (std::filesystem::exists(built)) return built;
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  const std::filesystem::path moved = std::filesystem::path(root != nullptr ? root : ".") /
                                      "bench" / std::filesystem::path(built).filename();
  return std::filesystem::exists(moved) ? moved.string() : built;
}

}  // namespace

nlohmann::json RunPeer(const std::string& built_script, const std::string& args,
                       const std::string& modules) {
  const std::string script = PeerScript(built_script);
  // A peer that uses torch must see a CUDA device; others (e.g. HF tokenizers) only import.
  const bool torch = modules.find("torch") != std::string::npos;
  const std::string probe = "python3 -c 'import " + modules + ", sys" +
                            (torch ? "; sys.exit(0 if torch.cuda.is_available() else 1)" : "") +
                            "' >/dev/null 2>&1";
  if (std::system(probe.c_str()) != 0) {
    std::printf("peer: skipped (python3 cannot import %s, or torch sees no CUDA device)\n",
                modules.c_str());
    return {};
  }
  const std::string cmd = "python3 " + script + (args.empty() ? "" : " " + args);
  std::printf("peer: %s\n", cmd.c_str());
  std::fflush(stdout);
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return {};
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), f)) out.append(buf, n);
  if (pclose(f) != 0) {
    std::printf("peer: `%s` failed (its stderr is above); stdout:\n%s\n", cmd.c_str(),
                out.c_str());
    return {};
  }
  // The JSON line is the last one starting with '{'; torch may print other lines before it.
  size_t line = out.rfind("\n{");
  line = line == std::string::npos ? 0 : line + 1;
  nlohmann::json j = nlohmann::json::parse(out.substr(line), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    std::printf("peer: `%s` printed no JSON object; no PyTorch column\n", cmd.c_str());
    return {};
  }
  return j;
}

double PeerNumber(const nlohmann::json& peer, const std::string& key) {
  return peer.contains(key) && peer[key].is_number() ? peer[key].get<double>() : 0.0;
}

int RunGpuSection(const char* name, const std::function<Status()>& run) {
#ifdef TANDEM_HAVE_CUDA
  if (kernels::CudaDeviceCount() == 0) {
    std::printf("%s: skipped (no CUDA device)\n", name);
    return 0;
  }
  const Status st = run();
  if (!st.ok()) {
    std::fprintf(stderr, "%s bench: %s\n", name, st.ToString().c_str());
    return 1;
  }
  return 0;
#else
  (void)run;
  std::printf("%s: skipped (built without CUDA)\n", name);
  return 0;
#endif
}

#ifdef TANDEM_HAVE_CUDA
Result<double> TimeMs(kernels::Stream stream, int iters, int warmup,
                      const std::function<Status()>& fn) {
  ASSIGN_OR_RETURN(kernels::CudaEvent start, kernels::CudaEvent::Create(0, true));
  ASSIGN_OR_RETURN(kernels::CudaEvent stop, kernels::CudaEvent::Create(0, true));
  for (int i = 0; i < warmup; ++i) RETURN_IF_ERROR(fn());
  RETURN_IF_ERROR(start.Record(stream));
  for (int i = 0; i < iters; ++i) RETURN_IF_ERROR(fn());
  RETURN_IF_ERROR(stop.Record(stream));
  RETURN_IF_ERROR(stop.Synchronize());
  ASSIGN_OR_RETURN(float ms, stop.ElapsedMsSince(start));
  return static_cast<double>(ms) / iters;
}

void FillBf16(void* p, int64_t n, uint32_t seed) {
  std::vector<kernels::bf16> h(static_cast<size_t>(std::min<int64_t>(n, 1 << 20)));
  for (size_t i = 0; i < h.size(); ++i)
    h[i] = kernels::bf16((((i * 2654435761u + seed) >> 8) % 1000) / 1000.f - 0.5f);
  for (int64_t off = 0; off < n; off += static_cast<int64_t>(h.size())) {
    const int64_t len = std::min<int64_t>(static_cast<int64_t>(h.size()), n - off);
    cudaMemcpy(static_cast<kernels::bf16*>(p) + off, h.data(), len * 2, cudaMemcpyHostToDevice);
  }
}

Result<kernels::Tensor> RandomBf16(kernels::Allocator& allocator, kernels::Shape shape,
                                   float scale, uint64_t seed, kernels::Stream stream) {
  using kernels::DType;
  using kernels::Tensor;
  ASSIGN_OR_RETURN(Tensor f, Tensor::Empty(allocator, DType::kF32, shape, stream));
  ASSIGN_OR_RETURN(Tensor b, Tensor::Empty(allocator, DType::kBF16, shape, stream));
  RETURN_IF_ERROR(kernels::PhiloxUniformFill(f, -scale, scale, seed, 0, stream));
  RETURN_IF_ERROR(kernels::Cast(b, f, stream));
  return b;
}

Result<double> GemmCeilingTflops(kernels::Stream stream, int iters) {
  const int n = 8192;
  const size_t bytes = size_t{2} * n * n;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  cublasHandle_t blas = nullptr;
  Result<double> ms = InternalError("cuBLAS ceiling: cudaMalloc of 3 x {} bytes failed", bytes);
  if (cudaMalloc(&a, bytes) == cudaSuccess && cudaMalloc(&b, bytes) == cudaSuccess &&
      cudaMalloc(&c, bytes) == cudaSuccess) {
    FillBf16(a, int64_t{n} * n, 1);
    FillBf16(b, int64_t{n} * n, 2);
    if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
      ms = InternalError("cuBLAS ceiling: cublasCreate failed");
    } else {
      cublasSetStream(blas, stream);
      const float one = 1.f, zero = 0.f;
      ms = TimeMs(stream, iters, 3, [&] {
        if (cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b,
                         CUDA_R_16BF, n, &zero, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
          return InternalError("cuBLAS ceiling: cublasGemmEx failed");
        return Status::Ok();
      });
      cublasDestroy(blas);
    }
  }
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  RETURN_IF_ERROR(ms.status());
  return 2.0 * n * n * n / *ms / 1e9;
}
#endif

}  // namespace tandem::bench
