// `tandem-bench kernels` section "math": cuBLAS bf16 8192^3 ceiling, tandem GEMMs at Qwen3-8B
// shapes (target 16384 tokens fwd; drafter 8192 rows fwd + dgrad + wgrad), the fused LM head
// + CE (8192 x 4096 x 151936, fwd+bwd) and AdamW + grad norm on 600M params, each next to
// the PyTorch peer (bench/kernels_peer_math.py) when `python3 -c "import torch"` works.
// Args: --no-peer, --ce-chunk=N (rows per LM-head chunk), --peer=PATH.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "bench/bench.h"

#ifdef TANDEM_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <nlohmann/json.hpp>

#include "kernels/adamw.h"
#include "kernels/gemm.h"
#include "kernels/lm_head_ce.h"
#endif

namespace tandem::bench {
namespace {

#ifdef TANDEM_HAVE_CUDA
using namespace tandem::kernels;

#define BENCH_CHECK(expr)                                                              \
  do {                                                                                 \
    if (!(expr)) {                                                                     \
      std::fprintf(stderr, "math bench: %s failed at %s:%d\n", #expr, __FILE__, __LINE__); \
      return 1;                                                                        \
    }                                                                                  \
  } while (0)
#define BENCH_OK(expr)                                                                 \
  do {                                                                                 \
    Status _s = (expr);                                                                \
    if (!_s.ok()) {                                                                    \
      std::fprintf(stderr, "math bench: %s\n", _s.ToString().c_str());                 \
      return 1;                                                                        \
    }                                                                                  \
  } while (0)

// Mean milliseconds of `fn` over `iters` runs after `warmup`, timed with events.
double TimeMs(const std::function<void()>& fn, int iters = 10, int warmup = 3) {
  for (int i = 0; i < warmup; ++i) fn();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaDeviceSynchronize();
  cudaEventRecord(a);
  for (int i = 0; i < iters; ++i) fn();
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / iters;
}

void* DevAlloc(size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
  cudaMemset(p, 0, bytes);
  return p;
}

// Fills bf16 buffer with small deterministic values (a cheap hash; finite, |x| < 0.5).
void FillBf16(void* p, int64_t n, uint32_t seed) {
  std::vector<bf16> h(static_cast<size_t>(std::min<int64_t>(n, 1 << 20)));
  for (size_t i = 0; i < h.size(); ++i)
    h[i] = bf16((((i * 2654435761u + seed) >> 8) % 1000) / 1000.f - 0.5f);
  for (int64_t off = 0; off < n; off += static_cast<int64_t>(h.size())) {
    int64_t len = std::min<int64_t>(static_cast<int64_t>(h.size()), n - off);
    cudaMemcpy(static_cast<bf16*>(p) + off, h.data(), len * 2, cudaMemcpyHostToDevice);
  }
}

nlohmann::json RunPeer(const std::string& path) {
  if (std::system("python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' "
                  ">/dev/null 2>&1") != 0) {
    std::printf("peer: skipped (python3 with CUDA torch not available)\n");
    return {};
  }
  std::string cmd = "python3 " + path;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return {};
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), f)) out.append(buf, n);
  if (pclose(f) != 0) {
    std::printf("peer: %s failed\n", cmd.c_str());
    return {};
  }
  auto j = nlohmann::json::parse(out, nullptr, false);
  return j.is_discarded() ? nlohmann::json{} : j;
}

int RunMath(const std::vector<std::string>& args) {
  bool peer = true;
  int64_t ce_chunk = kLmHeadCeDefaultChunkRows;
  std::string peer_path = std::string(TANDEM_BENCH_DIR) + "/kernels_peer_math.py";
  for (const auto& a : args) {
    if (a == "--no-peer") peer = false;
    else if (a.rfind("--ce-chunk=", 0) == 0) ce_chunk = std::stoll(a.substr(11));
    else if (a.rfind("--peer=", 0) == 0) peer_path = a.substr(7);
  }
  nlohmann::json pj = peer ? RunPeer(peer_path) : nlohmann::json{};
  auto peer_val = [&](const char* group, const std::string& key) -> double {
    if (!pj.contains(group) || !pj[group].contains(key)) return 0;
    return pj[group][key].get<double>();
  };

  auto ctx_or = GemmContext::Create(0);
  BENCH_OK(ctx_or.status());
  GemmContext* ctx = ctx_or->get();

  // Ceiling: plain cuBLAS bf16 GEMM, 8192^3, fp32 accumulate.
  const int64_t n = 8192;
  void* a = DevAlloc(n * n * 2);
  void* b = DevAlloc(n * n * 2);
  void* c = DevAlloc(n * n * 2);
  BENCH_CHECK(a && b && c);
  FillBf16(a, n * n, 1);
  FillBf16(b, n * n, 2);
  cublasHandle_t blas;
  BENCH_CHECK(cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS);
  float one = 1.f, zero = 0.f;
  double ceil_ms = TimeMs([&] {
    cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b, CUDA_R_16BF,
                 n, &zero, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  });
  const double ceiling = 2.0 * n * n * n / ceil_ms / 1e9;
  cublasDestroy(blas);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  std::printf("ceiling: cuBLAS bf16 8192^3 GEMM %.1f TFLOP/s (torch %.1f)\n", ceiling,
              peer_val("gemm_tflops", "ceiling 8192^3"));

  // GEMMs at Qwen3-8B shapes. Bar: >= 90% of the ceiling.
  struct Layer {
    const char* name;
    int64_t in, out;
  };
  const Layer layers[] = {{"q", 4096, 4096},     {"k", 4096, 1024},  {"v", 4096, 1024},
                          {"o", 4096, 4096},     {"gate", 4096, 12288}, {"up", 4096, 12288},
                          {"down", 12288, 4096}};
  std::printf("%-22s %9s %8s %9s %8s\n", "gemm", "TFLOP/s", "%ceil", "torch", "ratio");
  int below_bar = 0;
  for (auto [rows, tag] : {std::pair<int64_t, const char*>{16384, "target"}, {8192, "drafter"}}) {
    for (const Layer& l : layers) {
      void* x = DevAlloc(rows * l.in * 2);
      void* w = DevAlloc(l.out * l.in * 2);
      void* y = DevAlloc(rows * l.out * 2);
      void* dx = DevAlloc(rows * l.in * 2);
      void* dw = DevAlloc(l.out * l.in * 4);
      BENCH_CHECK(x && w && y && dx && dw);
      FillBf16(x, rows * l.in, 3);
      FillBf16(w, l.out * l.in, 4);
      FillBf16(y, rows * l.out, 5);
      Device d = Device::Cuda(0);
      TensorView vx(x, DType::kBF16, {rows, l.in}, d), vw(w, DType::kBF16, {l.out, l.in}, d),
          vy(y, DType::kBF16, {rows, l.out}, d), vdx(dx, DType::kBF16, {rows, l.in}, d),
          vdw(dw, DType::kF32, {l.out, l.in}, d);
      GemmOptions fwd, dgrad, wgrad;
      fwd.trans_b = true;
      wgrad.trans_a = true;
      wgrad.beta = 1.f;
      std::vector<std::pair<const char*, std::function<Status()>>> kinds = {
          {"fwd", [&] { return Gemm(ctx, vx, vw, vy, fwd, nullptr); }}};
      if (rows == 8192) {
        kinds.push_back({"dgrad", [&] { return Gemm(ctx, vy, vw, vdx, dgrad, nullptr); }});
        kinds.push_back({"wgrad", [&] { return Gemm(ctx, vy, vx, vdw, wgrad, nullptr); }});
      }
      for (auto& [kind, fn] : kinds) {
        BENCH_OK(fn());
        double ms = TimeMs([&] { (void)fn(); });
        double tf = 2.0 * rows * l.in * l.out / ms / 1e9;
        std::string key = std::string(tag) + " " + l.name + " " + kind;
        double torch_tf = peer_val("gemm_tflops", key);
        if (tf < 0.9 * ceiling) ++below_bar;
        std::printf("%-22s %9.1f %7.1f%% %9.1f %8.2f\n", key.c_str(), tf, 100 * tf / ceiling,
                    torch_tf, torch_tf > 0 ? tf / torch_tf : 0.0);
      }
      for (void* p : {x, w, y, dx, dw}) cudaFree(p);
    }
  }
  std::printf("gemm bar (>= 90%% of ceiling): %s (%d below)\n", below_bar ? "MISSED" : "met",
              below_bar);

  // Fused LM head + CE, forward + backward.
  {
    const int64_t rows = 8192, h = 4096, v = 151936;
    void* hid = DevAlloc(rows * h * 2);
    void* w = DevAlloc(v * h * 2);
    void* dh = DevAlloc(rows * h * 2);
    void* tgt = DevAlloc(rows * 4);
    void* wt = DevAlloc(rows * 4);
    void* loss = DevAlloc(4);
    void* am = DevAlloc(rows * 4);
    void* cor = DevAlloc(rows);
    const int64_t ws_bytes = LmHeadCeWorkspaceBytes(rows, v, ce_chunk);
    void* ws = DevAlloc(ws_bytes);
    BENCH_CHECK(hid && w && dh && tgt && wt && loss && am && cor && ws);
    FillBf16(hid, rows * h, 6);
    FillBf16(w, v * h, 7);
    std::vector<int32_t> ht(rows);
    std::vector<float> hw(rows, 1.f);
    for (int64_t i = 0; i < rows; ++i) ht[i] = static_cast<int32_t>((i * 7919) % v);
    cudaMemcpy(tgt, ht.data(), rows * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(wt, hw.data(), rows * 4, cudaMemcpyHostToDevice);
    Device d = Device::Cuda(0);
    LmHeadCeOutputs out{TensorView(loss, DType::kF32, {1}, d),
                        TensorView(am, DType::kI32, {rows}, d),
                        TensorView(cor, DType::kU8, {rows}, d),
                        TensorView(dh, DType::kBF16, {rows, h}, d)};
    auto run = [&] {
      return LmHeadCrossEntropy(ctx, TensorView(hid, DType::kBF16, {rows, h}, d),
                                TensorView(w, DType::kBF16, {v, h}, d),
                                TensorView(tgt, DType::kI32, {rows}, d),
                                TensorView(wt, DType::kF32, {rows}, d), out,
                                TensorView(ws, DType::kU8, {ws_bytes}, d), ce_chunk, nullptr);
    };
    BENCH_OK(run());
    double ms = TimeMs([&] { (void)run(); }, 5, 2);
    double tf = 4.0 * rows * h * v / ms / 1e9;
    double torch_ms = peer_val("lm_head_ce", "ms");
    double torch_peak = peer_val("lm_head_ce", "peak_bytes");
    // Extra memory beyond inputs: the workspace plus dHidden (the peer's peak includes its
    // x.grad, the same [R, H] bf16 tensor).
    double ours_peak = static_cast<double>(ws_bytes) + rows * h * 2;
    std::printf("lm_head_ce fwd+bwd %ldx%ldx%ld chunk %ld: %.2f ms, %.1f TFLOP/s = %.1f%% of "
                "GEMM ceiling (bar 85%%); torch chunked %.2f ms -> %.2fx (bar 1.3x); peak extra "
                "memory %.0f MiB vs torch %.0f MiB\n",
                static_cast<long>(rows), static_cast<long>(h), static_cast<long>(v),
                static_cast<long>(ce_chunk), ms, tf, 100 * tf / ceiling, torch_ms,
                torch_ms > 0 ? torch_ms / ms : 0.0, ours_peak / (1 << 20), torch_peak / (1 << 20));
    for (void* p : {hid, w, dh, tgt, wt, loss, am, cor, ws}) cudaFree(p);
  }

  // GradNorm + AdamW on a flat 600M-parameter buffer.
  {
    const int64_t np = 600'000'000;
    void* p = DevAlloc(np * 4);
    void* g = DevAlloc(np * 4);
    void* m = DevAlloc(np * 4);
    void* vv = DevAlloc(np * 4);
    void* pb = DevAlloc(np * 2);
    void* stats = DevAlloc(kGradStatsSize * 4);
    void* wsn = DevAlloc(kGradNormWorkspaceSize * 4);
    void* step = DevAlloc(4);
    BENCH_CHECK(p && g && m && vv && pb && stats && wsn && step);
    Device d = Device::Cuda(0);
    auto f = [&](void* q) { return TensorView(q, DType::kF32, {np}, d); };
    TensorView vs(stats, DType::kF32, {kGradStatsSize}, d), vstep(step, DType::kI32, {1}, d);
    AdamWConfig cfg{1e-4f, 0.9f, 0.999f, 1e-8f, 0.1f};
    BENCH_OK(GradNorm(f(g), 1.f, vs, TensorView(wsn, DType::kF32, {kGradNormWorkspaceSize}, d), nullptr));
    double norm_ms = TimeMs([&] {
      (void)GradNorm(f(g), 1.f, vs, TensorView(wsn, DType::kF32, {kGradNormWorkspaceSize}, d), nullptr);
    });
    double adam_ms = TimeMs([&] {
      (void)AdamWUpdate(cfg, f(p), f(g), f(m), f(vv), TensorView(pb, DType::kBF16, {np}, d), vs,
                        vstep, nullptr);
    });
    double torch_ms = peer_val("adamw", "ms");
    std::printf("grad_norm 600M: %.2f ms, %.0f GB/s\n", norm_ms, 4.0 * np / norm_ms / 1e6);
    std::printf("adamw 600M (+bf16 copy): %.2f ms, %.0f GB/s (30 B/param); torch fused AdamW "
                "%.2f ms (28 B/param, no bf16 copy) -> %.2fx\n",
                adam_ms, 30.0 * np / adam_ms / 1e6, torch_ms, torch_ms > 0 ? torch_ms / adam_ms : 0.0);
    for (void* q : {p, g, m, vv, pb, stats, wsn, step}) cudaFree(q);
  }
  return 0;
}
#else
int RunMath(const std::vector<std::string>&) {
  std::printf("math: skipped (tandem built without CUDA)\n");
  return 0;
}
#endif

}  // namespace

TANDEM_BENCH("kernels", "math", "GEMM, LM head + CE, AdamW vs cuBLAS ceiling and PyTorch",
             RunMath);

}  // namespace tandem::bench
