// Probe: does cuBLASLt on this GPU run e4m3 GEMMs with 1x128 activation scales
// (CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F) and 128x128 weight scales (BLK128x128_32F)?
// Which scale layouts does it expect, which shapes does it take, and how fast is it next to
// bf16, per-tensor FP8 and row-wise (OUTER_VEC_32F) FP8?
//
// Row-major y[M,N] = x[M,K] w[N,K]^T is run column-major as D[N,M] = op_T(w) * x, so
// cuBLASLt's A is the weight (BLK128x128) and its B the activation (VEC128).
// Build: nvcc -O2 -std=c++17 -arch=sm_90 fp8_lt_probe.cu -lcublasLt -o fp8_lt_probe
// Run: fp8_lt_probe (single GEMMs; RESULTS-h200.txt) or fp8_lt_probe batched (strided
// batches at the MoE expert shapes; RESULTS-h100-batched.txt: cuBLASLt 13.1 refuses block and
// row-wise scales there and runs per-tensor (scalar) scales at 1.5-1.6x bf16)
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e = (x);                                                              \
    if (e != cudaSuccess) {                                                           \
      printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

static int64_t Up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }
static int64_t Cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

enum Mode { kBlock, kTensor, kRowwise, kBf16 };
static const char* ModeName(Mode m) {
  switch (m) {
    case kBlock: return "fp8-block(1x128,128x128)";
    case kTensor: return "fp8-tensor";
    case kRowwise: return "fp8-rowwise(outer-vec)";
    default: return "bf16";
  }
}

struct Lt {
  cublasLtHandle_t h;
  void* ws;
  size_t ws_bytes = 64 << 20;
};

// Returns a status string; on success fills *algo.
// batch > 1: a strided batch of `batch` products, each operand's matrices back to back.
static cublasStatus_t Plan(Lt& lt, Mode mode, int64_t m, int64_t n, int64_t k, int64_t ld_x,
                           const void* sa, const void* sb, cublasLtMatmulDesc_t* desc,
                           cublasLtMatrixLayout_t* la, cublasLtMatrixLayout_t* lb,
                           cublasLtMatrixLayout_t* ld, cublasLtMatmulAlgo_t* algo, int* found,
                           int batch = 1) {
  cublasStatus_t s;
  if ((s = cublasLtMatmulDescCreate(desc, CUBLAS_COMPUTE_32F, CUDA_R_32F))) return s;
  cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t));
  cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn));
  cudaDataType_t in = mode == kBf16 ? CUDA_R_16BF : CUDA_R_8F_E4M3;
  if (mode != kBf16) {
    int32_t am = 0, bm = 0;
    if (mode == kBlock) am = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, bm = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    if (mode == kRowwise) am = bm = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    if ((s = cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &am, sizeof(am)))) return s;
    if ((s = cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &bm, sizeof(bm)))) return s;
    cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa));
    cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb));
  }
  cublasLtMatrixLayoutCreate(la, in, k, n, k);
  cublasLtMatrixLayoutCreate(lb, in, k, m, ld_x);
  cublasLtMatrixLayoutCreate(ld, CUDA_R_16BF, n, m, n);
  if (batch > 1) {
    int32_t b = batch;
    int64_t strides[3] = {n * k, m * ld_x, m * n};
    cublasLtMatrixLayout_t* layouts[3] = {la, lb, ld};
    for (int i = 0; i < 3; ++i) {
      if ((s = cublasLtMatrixLayoutSetAttribute(*layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof(b)))) return s;
      if ((s = cublasLtMatrixLayoutSetAttribute(*layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i], sizeof(strides[i])))) return s;
    }
  }
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt.ws_bytes,
                                       sizeof(lt.ws_bytes));
  cublasLtMatmulHeuristicResult_t r{};
  s = cublasLtMatmulAlgoGetHeuristic(lt.h, *desc, *la, *lb, *ld, *ld, pref, 1, &r, found);
  cublasLtMatmulPreferenceDestroy(pref);
  *algo = r.algo;
  return s;
}

struct HostQ {
  std::vector<__nv_fp8_e4m3> q;
  std::vector<float> deq;  // dequantized values, for the reference
};

// Activation x[M,K]: 1x128 groups. Scales written in `layout`: 0 = outer-dim-major
// (s[kb*ld + m], ld = Up(M,4)), 1 = row-major (s[m*KB + kb]).
static void QuantAct(const std::vector<float>& x, int64_t M, int64_t K, int layout, HostQ* out,
                     std::vector<float>* s) {
  int64_t KB = Cdiv(K, 128), ld = Up(M, 4);
  out->q.resize(M * K);
  out->deq.resize(M * K);
  s->assign(layout == 0 ? ld * KB : M * KB, 0.f);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t kb = 0; kb < KB; ++kb) {
      float amax = 0;
      for (int64_t k = kb * 128; k < std::min(K, kb * 128 + 128); ++k) amax = std::max(amax, std::fabs(x[m * K + k]));
      float sc = amax > 0 ? amax / 448.f : 1.f;
      (*s)[layout == 0 ? kb * ld + m : m * KB + kb] = sc;
      for (int64_t k = kb * 128; k < std::min(K, kb * 128 + 128); ++k) {
        out->q[m * K + k] = __nv_fp8_e4m3(x[m * K + k] / sc);
        out->deq[m * K + k] = float(out->q[m * K + k]) * sc;
      }
    }
}

// Weight w[N,K]: 128x128 blocks, scales row-major [NB, ldk] with ldk = KB or Up(KB,4).
static void QuantW(const std::vector<float>& w, int64_t N, int64_t K, int64_t ldk, HostQ* out,
                   std::vector<float>* s) {
  int64_t KB = Cdiv(K, 128), NB = Cdiv(N, 128);
  out->q.resize(N * K);
  out->deq.resize(N * K);
  s->assign(NB * ldk, 0.f);
  for (int64_t nb = 0; nb < NB; ++nb)
    for (int64_t kb = 0; kb < KB; ++kb) {
      float amax = 0;
      for (int64_t n = nb * 128; n < std::min(N, nb * 128 + 128); ++n)
        for (int64_t k = kb * 128; k < std::min(K, kb * 128 + 128); ++k) amax = std::max(amax, std::fabs(w[n * K + k]));
      float sc = amax > 0 ? amax / 448.f : 1.f;
      (*s)[nb * ldk + kb] = sc;
      for (int64_t n = nb * 128; n < std::min(N, nb * 128 + 128); ++n)
        for (int64_t k = kb * 128; k < std::min(K, kb * 128 + 128); ++k) {
          out->q[n * K + k] = __nv_fp8_e4m3(w[n * K + k] / sc);
          out->deq[n * K + k] = float(out->q[n * K + k]) * sc;
        }
    }
}

// Row-wise: one scale per row of v[R,K] over all of K (OUTER_VEC_32F).
static void QuantRows(const std::vector<float>& v, int64_t R, int64_t K, HostQ* out, std::vector<float>* s) {
  out->q.resize(R * K);
  out->deq.resize(R * K);
  s->assign(R, 0.f);
  for (int64_t r = 0; r < R; ++r) {
    float amax = 0;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(v[r * K + k]));
    float sc = amax > 0 ? amax / 448.f : 1.f;
    (*s)[r] = sc;
    for (int64_t k = 0; k < K; ++k) {
      out->q[r * K + k] = __nv_fp8_e4m3(v[r * K + k] / sc);
      out->deq[r * K + k] = float(out->q[r * K + k]) * sc;
    }
  }
}

template <class T>
static T* Up2(const std::vector<T>& v) {
  T* d;
  CK(cudaMalloc(&d, std::max<size_t>(v.size(), 1) * sizeof(T) + 256));
  CK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

// Correctness of one shape and layout combination; prints max relative error vs reference.
static void Check(Lt& lt, int64_t M, int64_t N, int64_t K, int act_layout, bool pad_kb) {
  std::mt19937 g(M * 131 + N * 7 + K);
  std::normal_distribution<float> nd;
  std::vector<float> x(M * K), w(N * K);
  // Row and block magnitudes differ by powers of two so a wrong scale layout shows.
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) x[m * K + k] = nd(g) * std::ldexp(1.f, (m % 5) - 2 + (k / 128) % 3);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) w[n * K + k] = nd(g) * 0.05f * std::ldexp(1.f, ((n / 128) % 3) - ((k / 128) % 4));
  HostQ qx, qw;
  std::vector<float> sx, sw;
  int64_t KB = Cdiv(K, 128);
  QuantAct(x, M, K, act_layout, &qx, &sx);
  QuantW(w, N, K, pad_kb ? Up(KB, 4) : KB, &qw, &sw);
  auto *dx = Up2(qx.q), *dw = Up2(qw.q);
  float *dsx = Up2(sx), *dsw = Up2(sw);
  __nv_bfloat16* dy;
  CK(cudaMalloc(&dy, M * N * 2));
  cublasLtMatmulDesc_t desc; cublasLtMatrixLayout_t la, lb, ld; cublasLtMatmulAlgo_t algo; int found = 0;
  cublasStatus_t s = Plan(lt, kBlock, M, N, K, K, dsw, dsx, &desc, &la, &lb, &ld, &algo, &found);
  printf("check M=%ld N=%ld K=%ld act_scales=%s w_scales_ld=%s: ", M, N, K,
         act_layout == 0 ? "outer-major(ld=Up(M,4))" : "row-major", pad_kb ? "Up(KB,4)" : "KB");
  if (s || !found) { printf("heuristic: %s found=%d\n", cublasLtGetStatusString(s), found); return; }
  float one = 1, zero = 0;
  s = cublasLtMatmul(lt.h, desc, &one, dw, la, dx, lb, &zero, dy, ld, dy, ld, &algo, lt.ws, lt.ws_bytes, 0);
  cudaError_t ce = cudaDeviceSynchronize();
  if (s || ce) { printf("matmul: %s / %s\n", cublasLtGetStatusString(s), cudaGetErrorString(ce)); return; }
  std::vector<__nv_bfloat16> y(M * N);
  CK(cudaMemcpy(y.data(), dy, M * N * 2, cudaMemcpyDeviceToHost));
  double max_rel = 0, num = 0, den = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double r = 0, a = 0;
      for (int64_t k = 0; k < K; ++k) r += double(qx.deq[m * K + k]) * qw.deq[n * K + k], a += std::fabs(double(qx.deq[m * K + k]) * qw.deq[n * K + k]);
      double e = std::fabs(double(float(y[m * N + n])) - r);
      max_rel = std::max(max_rel, e / (a + 1e-30));
      num += e * e; den += r * r;
    }
  printf("max |err|/sum|terms| = %.3g, rel L2 = %.3g -> %s\n", max_rel, std::sqrt(num / den),
         max_rel < 1e-2 ? "MATCH" : "MISMATCH");
  cudaFree(dx); cudaFree(dw); cudaFree(dsx); cudaFree(dsw); cudaFree(dy);
}

// A strided batch of B block-scaled products (the padded MoE expert layout): x [B, M, K] and
// w [B, N, K] back to back, each batch's scales back to back in the single-GEMM layouts
// (activation: outer-major, ld = M; weight: [NB, Up(KB,4)]). Which scales does cuBLASLt apply
// to batch b: its own (per-batch), batch 0's (shared), or none of these? Row-wise: each
// batch's N weight-row scales and M activation-row scales back to back.
static void CheckBatched(Lt& lt, Mode mode, int B, int64_t M, int64_t N, int64_t K) {
  std::mt19937 g(B * 1009 + M * 131 + N * 7 + K);
  std::normal_distribution<float> nd;
  int64_t KB = Cdiv(K, 128), NB = Cdiv(N, 128), ldk = Up(KB, 4);
  std::vector<HostQ> qx(B), qw(B);
  std::vector<__nv_fp8_e4m3> hx, hw;
  std::vector<float> hsx, hsw;
  for (int b = 0; b < B; ++b) {
    std::vector<float> x(M * K), w(N * K), sx, sw;
    // Batch magnitudes differ by powers of two so a shared or shifted scale shows.
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) x[m * K + k] = nd(g) * std::ldexp(1.f, (m % 5) - 2 + (k / 128) % 3 + b % 4);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) w[n * K + k] = nd(g) * 0.05f * std::ldexp(1.f, ((n / 128) % 3) - ((k / 128) % 4) - (b % 3));
    if (mode == kRowwise) {
      QuantRows(x, M, K, &qx[b], &sx);
      QuantRows(w, N, K, &qw[b], &sw);
    } else {
      QuantAct(x, M, K, 0, &qx[b], &sx);
      QuantW(w, N, K, ldk, &qw[b], &sw);
    }
    hx.insert(hx.end(), qx[b].q.begin(), qx[b].q.end());
    hw.insert(hw.end(), qw[b].q.begin(), qw[b].q.end());
    hsx.insert(hsx.end(), sx.begin(), sx.end());
    hsw.insert(hsw.end(), sw.begin(), sw.end());
  }
  auto *dx = Up2(hx), *dw = Up2(hw);
  float *dsx = Up2(hsx), *dsw = Up2(hsw);
  __nv_bfloat16* dy;
  CK(cudaMalloc(&dy, B * M * N * 2));
  CK(cudaMemset(dy, 0xff, B * M * N * 2));
  cublasLtMatmulDesc_t desc; cublasLtMatrixLayout_t la, lb, ld; cublasLtMatmulAlgo_t algo; int found = 0;
  cublasStatus_t s = Plan(lt, mode, M, N, K, K, dsw, dsx, &desc, &la, &lb, &ld, &algo, &found, B);
  printf("batched check %s B=%d M=%ld N=%ld K=%ld (scales %ld + %ld floats per batch): ", ModeName(mode), B,
         M, N, K, hsx.size() / B, hsw.size() / B);
  if (s || !found) { printf("heuristic: %s found=%d\n", cublasLtGetStatusString(s), found); return; }
  float one = 1, zero = 0;
  s = cublasLtMatmul(lt.h, desc, &one, dw, la, dx, lb, &zero, dy, ld, dy, ld, &algo, lt.ws, lt.ws_bytes, 0);
  cudaError_t ce = cudaDeviceSynchronize();
  if (s || ce) { printf("matmul: %s / %s\n", cublasLtGetStatusString(s), cudaGetErrorString(ce)); return; }
  std::vector<__nv_bfloat16> y(B * M * N);
  CK(cudaMemcpy(y.data(), dy, B * M * N * 2, cudaMemcpyDeviceToHost));
  printf("\n");
  for (int b = 0; b < B; ++b) {
    double max_rel = 0, num = 0, den = 0;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double r = 0, a = 0;
        for (int64_t k = 0; k < K; ++k) {
          double t = double(qx[b].deq[m * K + k]) * qw[b].deq[n * K + k];
          r += t, a += std::fabs(t);
        }
        double e = std::fabs(double(float(y[(b * M + m) * N + n])) - r);
        max_rel = std::max(max_rel, std::isfinite(e) ? e / (a + 1e-30) : 1e30);
        num += e * e; den += r * r;
      }
    printf("  batch %d: max |err|/sum|terms| = %.3g, rel L2 = %.3g -> %s\n", b, max_rel,
           std::sqrt(num / den), max_rel < 1e-2 ? "MATCH (own scales)" : "MISMATCH");
  }
  cudaFree(dx); cudaFree(dw); cudaFree(dsx); cudaFree(dsw); cudaFree(dy);
}

// B products of one shape as one call (B > 1: strided batch; bf16 or FP8), timed.
static double TimeBatched(Lt& lt, Mode mode, int B, int64_t M, int64_t N, int64_t K, const char* label) {
  size_t es = mode == kBf16 ? 2 : 1;
  void *x, *w, *y; float *sx, *sw;
  CK(cudaMalloc(&x, B * M * K * es)); CK(cudaMalloc(&w, B * N * K * es)); CK(cudaMalloc(&y, B * M * N * 2));
  CK(cudaMemset(x, 0x38, B * M * K * es)); CK(cudaMemset(w, 0x38, B * N * K * es));
  // Enough for every mode's scales: blocks, or one per row / column (row-wise).
  size_t ns = B * (std::max<int64_t>(Up(M, 4) * Cdiv(K, 128), M) +
                   std::max<int64_t>(Cdiv(N, 128) * Up(Cdiv(K, 128), 4), N)) + 8;
  CK(cudaMalloc(&sx, ns * 4)); CK(cudaMalloc(&sw, ns * 4));
  std::vector<float> ones(ns, 1.f);
  CK(cudaMemcpy(sx, ones.data(), ns * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(sw, ones.data(), ns * 4, cudaMemcpyHostToDevice));
  cublasLtMatmulDesc_t desc; cublasLtMatrixLayout_t la, lb, ld; cublasLtMatmulAlgo_t algo; int found = 0;
  cublasStatus_t s = Plan(lt, mode, M, N, K, K, sw, sx, &desc, &la, &lb, &ld, &algo, &found, B);
  if (s || !found) { printf("%-12s %-26s B=%d M=%ld N=%ld K=%ld: no algo (%s)\n", label, ModeName(mode), B, M, N, K, cublasLtGetStatusString(s)); return 0; }
  float one = 1, zero = 0;
  for (int i = 0; i < 3; ++i) cublasLtMatmul(lt.h, desc, &one, w, la, x, lb, &zero, y, ld, y, ld, &algo, lt.ws, lt.ws_bytes, 0);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  int iters = 20;
  cudaEventRecord(a);
  for (int i = 0; i < iters; ++i) cublasLtMatmul(lt.h, desc, &one, w, la, x, lb, &zero, y, ld, y, ld, &algo, lt.ws, lt.ws_bytes, 0);
  cudaEventRecord(b);
  CK(cudaEventSynchronize(b));
  float ms; cudaEventElapsedTime(&ms, a, b); ms /= iters;
  printf("%-12s %-26s B=%d M=%ld N=%ld K=%ld: %.3f ms  %.0f TFLOP/s\n", label, ModeName(mode), B, M, N, K, ms,
         2.0 * B * M * N * K / ms / 1e9);
  cudaFree(x); cudaFree(w); cudaFree(y); cudaFree(sx); cudaFree(sw);
  cublasLtMatmulDescDestroy(desc); cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(ld);
  return ms;
}

static void Time(Lt& lt, Mode mode, int64_t M, int64_t N, int64_t K, const char* label) {
  TimeBatched(lt, mode, 1, M, N, K, label);
}

// The padded MoE expert GEMMs: Qwen3.6-35B-A3B (E 256, I 512, H 2048, 608 rows per expert at
// 16384 tokens top-8) and Qwen3-30B-A3B (E 128, I 768, H 2048, ~1104 rows per expert).
static void Batched(Lt& lt) {
  for (Mode m : {kBlock, kRowwise}) {
    CheckBatched(lt, m, 3, 48, 256, 384);
    CheckBatched(lt, m, 5, 36, 272, 400);   // N, K not multiples of 128; M a multiple of 4 only
    CheckBatched(lt, m, 4, 128, 1024, 2048);
  }
  struct { const char* name; int e; int64_t cap, i, h; } shapes[] = {{"35b-a3b", 256, 608, 512, 2048}, {"30b-a3b", 128, 1104, 768, 2048}};
  for (auto& sh : shapes) {
    const Mode modes[4] = {kBf16, kBlock, kRowwise, kTensor};
    double t[4] = {0, 0, 0, 0};
    bool ran[4] = {true, true, true, true};
    int j = 0;
    for (Mode m : modes) {
      for (double ms : {TimeBatched(lt, m, sh.e, sh.cap, 2 * sh.i, sh.h, sh.name),
                        TimeBatched(lt, m, sh.e, sh.cap, sh.h, sh.i, sh.name)}) {
        t[j] += ms;
        ran[j] = ran[j] && ms > 0;  // 0: no algorithm
      }
      ++j;
    }
    for (int i = 1; i < 4; ++i) {
      if (ran[0] && ran[i])
        printf("%-12s both projections: bf16 %.3f ms, %s %.3f ms -> %.2fx bf16\n", sh.name, t[0],
               ModeName(modes[i]), t[i], t[0] / t[i]);
      else
        printf("%-12s both projections: %s refused (no algorithm)\n", sh.name,
               ModeName(ran[0] ? modes[i] : kBf16));
    }
  }
}

int main(int argc, char** argv) {
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
  printf("device %s sm_%d%d, cuBLASLt %zu\n", p.name, p.major, p.minor, cublasLtGetVersion());
  Lt lt; cublasLtCreate(&lt.h); CK(cudaMalloc(&lt.ws, lt.ws_bytes));
  if (argc > 1 && std::string(argv[1]) == "batched") {
    Batched(lt);
    return 0;
  }
  // Layout discovery and shape limits.
  for (int al : {0, 1})
    for (bool pad : {true, false}) Check(lt, 259, 384, 640, al, pad);
  Check(lt, 1, 128, 128, 0, true);
  Check(lt, 3, 200, 256, 0, true);
  Check(lt, 130, 136, 384, 0, true);
  Check(lt, 131, 256, 272, 0, true);   // K not a multiple of 128
  Check(lt, 64, 96, 4096, 0, true);
  Check(lt, 260, 1024, 1152, 0, true); // K blocks = 9 (not a multiple of 4)
  // Rates: ceiling and the Qwen3-8B projections at 16384 rows.
  for (Mode m : {kBf16, kTensor, kRowwise, kBlock}) Time(lt, m, 8192, 8192, 8192, "8192^3");
  struct { const char* name; int64_t n, k; } shapes[] = {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 24576, 4096}, {"down", 4096, 12288}};
  for (auto& sh : shapes)
    for (Mode m : {kBf16, kTensor, kRowwise, kBlock}) Time(lt, m, 16384, sh.n, sh.k, sh.name);
  Time(lt, kBlock, 16383, 6144, 4096, "qkv-odd");
  Time(lt, kBlock, 16381, 6144, 4096, "qkv-odd");
  return 0;
}
