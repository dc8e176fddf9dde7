// `tandem-bench kernels` section "math": cuBLAS bf16 8192^3 ceiling, tandem GEMMs at Qwen3-8B
// shapes (target 16384 tokens fwd; drafter 8192 rows fwd + dgrad + wgrad), the fused LM head
// + CE (8192 x 4096 x 151936, fwd+bwd) and AdamW + grad norm on 600M params, each next to
// the PyTorch peer (bench/kernels_peer_math.py) when `python3 -c "import torch"` works.
// Args: --no-peer, --ce-chunk=N (rows per LM-head chunk), --peer=PATH.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/bench_util.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/optim/adamw.h"
#include "kernels/gemm/gemm.h"
#include "kernels/loss/lm_head_ce.h"
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

// Mean milliseconds of `fn` over `iters` runs after `warmup` on the legacy default stream;
// -1, after printing the error, when a call or the event API fails.
double MeanMs(const std::function<Status()>& fn, int iters = 10, int warmup = 3) {
  const Result<double> ms = TimeMs(nullptr, iters, warmup, fn);
  if (!ms.ok()) std::fprintf(stderr, "math bench: %s\n", ms.status().ToString().c_str());
  return ms.ok() ? *ms : -1.0;
}

void* DevAlloc(size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
  cudaMemset(p, 0, bytes);
  return p;
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
  nlohmann::json pj = peer ? RunPeer(peer_path, "", "torch") : nlohmann::json{};
  auto peer_val = [&](const char* group, const std::string& key) -> double {
    if (!pj.contains(group) || !pj[group].contains(key)) return 0;
    return pj[group][key].get<double>();
  };

  auto ctx_or = GemmContext::Create(0);
  BENCH_OK(ctx_or.status());
  GemmContext* ctx = ctx_or->get();

  // Ceiling: plain cuBLAS bf16 GEMM, 8192^3, fp32 accumulate.
  const Result<double> ceiling_or = GemmCeilingTflops(nullptr);
  BENCH_OK(ceiling_or.status());
  const double ceiling = *ceiling_or;
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
        double ms = MeanMs(fn);
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
                        TensorView(dh, DType::kBF16, {rows, h}, d), {}, {}};
    auto run = [&] {
      return LmHeadCrossEntropy(ctx, TensorView(hid, DType::kBF16, {rows, h}, d),
                                TensorView(w, DType::kBF16, {v, h}, d),
                                TensorView(tgt, DType::kI32, {rows}, d),
                                TensorView(wt, DType::kF32, {rows}, d), out,
                                TensorView(ws, DType::kU8, {ws_bytes}, d), ce_chunk, nullptr);
    };
    BENCH_OK(run());
    double ms = MeanMs(run, 5, 2);
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
    double norm_ms = MeanMs([&] {
      return GradNorm(f(g), 1.f, vs, TensorView(wsn, DType::kF32, {kGradNormWorkspaceSize}, d), nullptr);
    });
    double adam_ms = MeanMs([&] {
      return AdamWUpdate(cfg, f(p), f(g), f(m), f(vv), TensorView(pb, DType::kBF16, {np}, d), vs,
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
