// `tandem-bench moe`: the routed expert GEMMs (kernels/moe/experts.h) at the Qwen3.6-35B-A3B
// expert shape (256 experts of width 512, top-8, hidden 2048) on 16,384 tokens, in TFLOP/s
// against the dense bf16 8192^3 GEMM rate of the same run (bar: >= 50%): every MoeExperts
// path (loop, padded, grouped) on the same rows, each checked against the loop's
// output, and the path the rule picks; then the whole MoE block (router GEMM, router,
// permutation, the offsets' host sync, gather, experts on the rule's path, combine) per token.
// Then precision = "fp8" (kernels/moe/experts_fp8.h, row-wise e4m3, on the layout the rule
// picks): its two GEMMs alone and the GEMMs with their quantize / SwiGLU / rescale kernels on
// the same rows (checked against the bf16 loop within FP8's error), each against the fastest
// bf16 path (bar: >= 1.4x); on the padded layout also from the routed tokens on both sides
// (the bf16 path's row gather counted; the FP8 path quantizes each token once and gathers its
// codes); and the FP8 block against the bf16 block of the same run.
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
#include <cuda_runtime_api.h>

#include "kernels/core/device_pools.h"
#include "kernels/elementwise/row_gather.h"
#include "kernels/gemm/fp8_raw.h"
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

void PrintRate(const char* what, double ms, double flops, double ceiling) {
  const double rate = flops / ms * 1e-9;
  std::printf("expert GEMMs (%s): %.3f ms, %.1f TFLOP/s = %.1f%% of the dense rate (bar 50%%: "
              "%s)\n", what, ms, rate, 100.0 * rate / ceiling,
              rate >= 0.5 * ceiling ? "met" : "missed");
}

// ||got - want|| / ||want|| over every expert's rows, got's expert e at row got_start[e]
// and want's at offsets[e] (NaN when got holds a NaN there).
Result<double> RelativeError(const TensorView& got, const std::vector<int64_t>& got_start,
                             const std::vector<bf16>& want, const std::vector<int32_t>& offsets) {
  std::vector<bf16> g(static_cast<size_t>(got.numel()));
  RETURN_IF_ERROR(CopyToHost(g.data(), got, nullptr));
  const int64_t h = got.dim(1);
  double diff = 0, norm = 0;
  for (size_t e = 0; e + 1 < offsets.size(); ++e)
    for (int64_t j = 0; j < (offsets[e + 1] - offsets[e]) * h; ++j) {
      const double a = g[got_start[e] * h + j].f(), b = want[offsets[e] * h + j].f();
      diff += (a - b) * (a - b);
      norm += b * b;
    }
  return std::sqrt(diff / norm);
}

// The buffers of one path: x (random rows), gate_up, act, y.
struct PathBuffers {
  Tensor x, gu, act, y;
};

Result<PathBuffers> MakeBuffers(Allocator& pool, int64_t rows, int64_t h, int64_t i) {
  PathBuffers b;
  ASSIGN_OR_RETURN(b.x, Tensor::Empty(pool, DType::kBF16, {rows, h}));
  ASSIGN_OR_RETURN(b.gu, Tensor::Empty(pool, DType::kBF16, {rows, 2 * i}));
  ASSIGN_OR_RETURN(b.act, Tensor::Empty(pool, DType::kBF16, {rows, i}));
  ASSIGN_OR_RETURN(b.y, Tensor::Empty(pool, DType::kBF16, {rows, h}));
  return b;
}

// The routed tokens [T, H] and, on the padded layout (E cap rows), the token each row takes
// (MoePadLayout's padded_token): each token feeds top-k rows, as in MoeLayer.
struct TokenRows {
  TensorView tokens, padded_token;
};

// Every MoeExperts path on the same token rows (kPadded: the same rows in the padded layout),
// timed and checked against the loop.
// *best_ms: the fastest path's time; *want: the loop's output rows (the reference), *x: the
// rows they were computed from.
Status TimePaths(const MoeBenchShape& s, GemmContext* gemm, Allocator& pool,
                 const MoeExpertWeights& w, const std::vector<int32_t>& offsets,
                 const TokenRows& tokens, double ceiling, double flops, double* best_ms,
                 double* gathered_ms, std::vector<bf16>* want_out, Tensor* x_out) {
  const int64_t n = offsets.back(), h = s.hidden, i = s.width, e_count = s.experts;
  const int64_t cap = MoeExpertCapacity(offsets);
  ASSIGN_OR_RETURN(PathBuffers compact, MakeBuffers(pool, MoePaddedRows(n), h, i));
  ASSIGN_OR_RETURN(PathBuffers padded, MakeBuffers(pool, e_count * cap, h, i));
  ASSIGN_OR_RETURN(Tensor random, RandomBf16(pool, {MoePaddedRows(n), h}, 1.f, 6, nullptr));
  RETURN_IF_ERROR(Copy(compact.x, random, nullptr));
  // The padded layout of the same rows: expert e's row j at e cap + j, padding from row 0.
  std::vector<int32_t> from(static_cast<size_t>(e_count * cap), 0);
  std::vector<int64_t> compact_start(offsets.begin(), offsets.end() - 1), padded_start;
  for (int64_t e = 0; e < e_count; ++e) {
    padded_start.push_back(e * cap);
    for (int32_t j = 0; j < offsets[e + 1] - offsets[e]; ++j) from[e * cap + j] = offsets[e] + j;
  }
  ASSIGN_OR_RETURN(Tensor from_d, Tensor::Empty(pool, DType::kI32, {e_count * cap}));
  RETURN_IF_ERROR(CopyFromHost(from_d, from.data(), nullptr));
  RETURN_IF_ERROR(RowGather(padded.x, from_d, random, nullptr));

  std::vector<bf16> want(static_cast<size_t>(compact.y.numel()));
  int64_t active = 0;
  for (int64_t e = 0; e < e_count; ++e) active += offsets[e + 1] > offsets[e];
  for (MoeExpertsPath path :
       {MoeExpertsPath::kLoop, MoeExpertsPath::kPadded, MoeExpertsPath::kGrouped}) {
    ASSIGN_OR_RETURN(std::unique_ptr<MoeExperts> experts, MoeExperts::Create(pool, e_count, path));
    const bool pad = path == MoeExpertsPath::kPadded;
    PathBuffers& b = pad ? padded : compact;
    auto run = [&] {
      return pad ? experts->ForwardPadded(gemm, w, offsets, cap, b.x, b.gu, b.act, b.y, nullptr)
                 : experts->Forward(gemm, w, offsets, b.x, b.gu, b.act, b.y, nullptr);
    };
    // Poisoned output (bf16 0xffff is a NaN): every row must be written.
    if (cudaMemset(b.y.data(), 0xff, b.y.nbytes()) != cudaSuccess)
      return CudaError("moe bench: cudaMemset failed");
    RETURN_IF_ERROR(run());
    if (experts->last_path() != path)
      return InternalError("moe bench: asked for the {} path, ran {}", MoeExpertsPathName(path),
                           MoeExpertsPathName(experts->last_path()));
    double error = 0;
    if (path == MoeExpertsPath::kLoop) {
      RETURN_IF_ERROR(CopyToHost(want.data(), b.y, nullptr));
    } else {
      ASSIGN_OR_RETURN(error, RelativeError(b.y, pad ? padded_start : compact_start, want,
                                            offsets));
    }
    ASSIGN_OR_RETURN(const double ms, TimeMs(nullptr, s.iters, 2, run));
    char what[200];
    if (path == MoeExpertsPath::kLoop)
      std::snprintf(what, sizeof(what), "loop: per-expert cuBLASLt, %ld GEMMs", 2 * active);
    else if (pad)
      std::snprintf(what, sizeof(what), "padded: %ld experts x %ld rows (%.1f%% padding), cuBLAS "
                    "strided batch, 2 calls; vs loop %.1e", e_count, cap,
                    100.0 * (static_cast<double>(e_count * cap) / static_cast<double>(n) - 1.0),
                    error);
    else
      std::snprintf(what, sizeof(what), "grouped: cublasGemmGroupedBatchedEx, 2 calls of %ld "
                    "groups; vs loop %.1e", active, error);
    PrintRate(what, ms, flops, ceiling);
    *best_ms = std::min(*best_ms, ms);
    if (pad) {  // as MoeLayer runs it: the rows gathered from the routed tokens first
      ASSIGN_OR_RETURN(*gathered_ms, TimeMs(nullptr, s.iters, 2, [&] {
                         RETURN_IF_ERROR(RowGather(padded.x, tokens.padded_token, tokens.tokens,
                                                   nullptr));
                         return run();
                       }));
      std::printf("expert GEMMs, padded, with the row gather from the tokens before them: "
                  "%.3f ms\n", *gathered_ms);
    }
    if (!(error < 1e-2))
      return InternalError("moe bench: the {} path differs from the loop by {}",
                           MoeExpertsPathName(path), error);
  }
  std::printf("rule (MoeChooseExpertsPath) picks: %s\n",
              MoeExpertsPathName(MoeChooseExpertsPath(offsets)));
  *want_out = std::move(want);
  *x_out = std::move(random);
  return Status::Ok();
}

// The FP8 expert path's two unscaled e4m3 GEMMs alone, on the codes in `ws` (whatever the
// last forward left there: timing only): one strided batch per projection (padded), or one
// GEMM per expert with rows on its bucket (exact).
Status Fp8GemmsOnly(GemmContext* gemm, const MoeFp8ExpertWeights& w,
                    const std::vector<int32_t>& offsets, int64_t cap, bool padded,
                    const MoeFp8Workspace& ws, const Tensor& gu, const Tensor& y) {
  const int64_t e_count = w.experts(), h = w.gate_up.dim(2), i = w.down.dim(2);
  auto project = [&](const TensorView& weight, const TensorView& codes,
                     const TensorView& out) -> Status {
    if (padded)
      return Fp8GemmRaw(gemm, codes.Narrow(0, 0, e_count * cap), weight,
                        out.Narrow(0, 0, e_count * cap), e_count, nullptr);
    for (int64_t e = 0; e < e_count; ++e) {
      const int64_t count = offsets[e + 1] - offsets[e];
      if (count == 0) continue;
      const int64_t r = MoeBucketRows(count);
      RETURN_IF_ERROR(Fp8GemmRaw(gemm, codes.Narrow(0, offsets[e], r), weight.Narrow(0, e, 1),
                                 out.Narrow(0, offsets[e], r), 1, nullptr));
    }
    return Status::Ok();
  };
  RETURN_IF_ERROR(project(w.gate_up, ws.Codes(h), gu.view()));
  return project(w.down, ws.Codes(i), y.view());
}

void PrintFp8Ratio(const char* what, double ms, double bf16_ms) {
  const double ratio = bf16_ms / ms;
  std::printf("  %s: %.3f ms, %.2fx (bar >= 1.4x: %s)\n", what, ms, ratio,
              ratio >= 1.4 ? "met" : "missed");
}

// The FP8 expert path on the rows TimePaths used (x), on the layout the rule picks (padded:
// x plays the tokens, padded_token the identity layout of TimePaths), its error against the
// bf16 loop's output, and its time against the fastest bf16 path's (bf16_ms: two GEMMs and
// the SwiGLU kernel between them): the GEMMs alone, and the GEMMs with their kernels (the
// rows' quantization, fused with the gather on the padded layout; the fused SwiGLU +
// quantize; the in-place rescale).
Status TimeFp8Experts(const MoeBenchShape& s, GemmContext* gemm, Allocator& pool,
                      const MoeFp8ExpertWeights& w8, const std::vector<int32_t>& offsets,
                      const Tensor& x, const TokenRows& tokens, const std::vector<bf16>& want,
                      double ceiling, double flops, double bf16_ms, double bf16_gathered_ms) {
  const int64_t n = offsets.back(), h = s.hidden, i = s.width, e = s.experts;
  const bool padded = MoeChooseExpertsPath(offsets) == MoeExpertsPath::kPadded;
  const int64_t cap = MoeExpertCapacity(offsets), rows = MoeFp8BufferRows(n);
  ASSIGN_OR_RETURN(Tensor offsets_d, Tensor::Empty(pool, DType::kI32, {e + 1}));
  RETURN_IF_ERROR(CopyFromHost(offsets_d, offsets.data(), nullptr));
  std::vector<int32_t> from(static_cast<size_t>(e * cap), 0);
  std::vector<int64_t> start;
  for (int64_t x_e = 0; x_e < e; ++x_e) {
    start.push_back(padded ? x_e * cap : offsets[x_e]);
    for (int32_t j = 0; j < offsets[x_e + 1] - offsets[x_e]; ++j)
      from[x_e * cap + j] = offsets[x_e] + j;
  }
  ASSIGN_OR_RETURN(Tensor from_d, Tensor::Empty(pool, DType::kI32, {e * cap}));
  RETURN_IF_ERROR(CopyFromHost(from_d, from.data(), nullptr));
  ASSIGN_OR_RETURN(Tensor ws_bytes, Tensor::Empty(pool, DType::kU8,
                                                  {MoeFp8WorkspaceBytes(n, h, i)}));
  int64_t off = 0;
  const MoeFp8Workspace ws = CarveMoeFp8Workspace(ws_bytes.data(), &off, n, h, i,
                                                  Device::Cuda(0));
  ASSIGN_OR_RETURN(Tensor gu, Tensor::Empty(pool, DType::kBF16, {rows, 2 * i}));
  ASSIGN_OR_RETURN(Tensor y, Tensor::Empty(pool, DType::kBF16, {rows, h}));
  auto forward = [&](bool rescale) {
    return padded ? MoeFp8ExpertsForwardPadded(gemm, w8, offsets, offsets_d, cap, ws,
                                               x.view().Narrow(0, 0, n), from_d, gu, y, nullptr,
                                               rescale)
                  : MoeFp8ExpertsForward(gemm, w8, offsets, offsets_d, ws, x, gu, y, nullptr,
                                         rescale);
  };
  if (cudaMemset(y.data(), 0xff, y.nbytes()) != cudaSuccess)
    return CudaError("moe bench: cudaMemset failed");
  RETURN_IF_ERROR(forward(true));
  ASSIGN_OR_RETURN(const double error, RelativeError(y, start, want, offsets));
  // What MoeLayer runs: down's scales are applied in the combine (which the bf16 block runs
  // too), not by a pass of their own.
  ASSIGN_OR_RETURN(const double ms, TimeMs(nullptr, s.iters, 2, [&] { return forward(false); }));
  ASSIGN_OR_RETURN(const double rescaled_ms,
                   TimeMs(nullptr, s.iters, 2, [&] { return forward(true); }));
  ASSIGN_OR_RETURN(const double gemm_ms, TimeMs(nullptr, s.iters, 2, [&] {
    return Fp8GemmsOnly(gemm, w8, offsets, cap, padded, ws, gu, y);
  }));
  char what[240];
  std::snprintf(what, sizeof(what), "fp8 row-wise, %s, GEMMs alone", padded
                ? "padded: 2 strided-batched unscaled e4m3 cuBLASLt calls"
                : "exact: unscaled e4m3 cuBLASLt per expert");
  PrintRate(what, gemm_ms, flops, ceiling);
  std::snprintf(what, sizeof(what), "fp8 row-wise, GEMMs + x quantize%s + SwiGLU/quantize "
                "kernels, down's scales left to the combine; vs bf16 loop %.1e",
                padded ? " (fused gather)" : "", error);
  PrintRate(what, ms, flops, ceiling);
  std::printf("fp8 expert GEMMs vs the fastest bf16 path (%.3f ms: 2 GEMMs + SwiGLU):\n",
              bf16_ms);
  PrintFp8Ratio("GEMMs alone", gemm_ms, bf16_ms);
  PrintFp8Ratio("GEMMs + x quantize + SwiGLU/quantize kernels (as MoeLayer runs them)", ms,
                bf16_ms);
  PrintFp8Ratio("the same + an in-place rescale pass over y (standalone contract)", rescaled_ms,
                bf16_ms);
  if (padded) {  // each token quantized once, its codes gathered to its top-k rows
    ASSIGN_OR_RETURN(const double tokens_ms, TimeMs(nullptr, s.iters, 2, [&] {
      return MoeFp8ExpertsForwardPadded(gemm, w8, offsets, offsets_d, cap, ws, tokens.tokens,
                                        tokens.padded_token, gu, y, nullptr, false);
    }));
    std::printf("from the routed tokens on both sides (bf16: row gather + 2 GEMMs + SwiGLU, "
                "%.3f ms; fp8: the tokens quantized once, their codes gathered):\n",
                bf16_gathered_ms);
    PrintFp8Ratio("GEMMs + tokens' quantize + code gather + SwiGLU/quantize (as MoeLayer runs "
                  "them)", tokens_ms, bf16_gathered_ms);
  }
  // e4m3's rounding of weights and activations: ~6% (a wrong layout or scale gives ~1).
  if (!(error < 0.1))
    return InternalError("moe bench: the fp8 path differs from the bf16 loop by {}", error);
  return Status::Ok();
}

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
  MoeLayerWeights w;
  w.router = router;
  w.experts = {gate_up, down};
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

  // Each padded row's token (expert e's j-th row takes perm[o_e + j]; padding token 0).
  std::vector<int32_t> perm_h(static_cast<size_t>(n));
  RETURN_IF_ERROR(CopyToHost(perm_h.data(), perm, nullptr));
  RETURN_IF_ERROR(SynchronizeStream(Device::Cuda(0), nullptr));
  const int64_t cap = MoeExpertCapacity(offsets);
  std::vector<int32_t> token_of(static_cast<size_t>(s.experts * cap), 0);
  for (int64_t e = 0; e < s.experts; ++e)
    for (int32_t j = 0; j < offsets[e + 1] - offsets[e]; ++j)
      token_of[e * cap + j] = perm_h[offsets[e] + j];
  ASSIGN_OR_RETURN(Tensor token_of_d, Tensor::Empty(*pool, DType::kI32, {s.experts * cap}));
  RETURN_IF_ERROR(CopyFromHost(token_of_d, token_of.data(), nullptr));
  const TokenRows tokens{x.view(), token_of_d.view()};

  const double flops = 2.0 * static_cast<double>(n) * 3.0 * static_cast<double>(i * h);
  double bf16_ms = 1e30, bf16_gathered_ms = 0;
  std::vector<bf16> want;
  Tensor rows_x;
  RETURN_IF_ERROR(TimePaths(s, gemm.get(), *pool, {gate_up, down}, offsets, tokens, ceiling,
                            flops, &bf16_ms, &bf16_gathered_ms, &want, &rows_x));
  ASSIGN_OR_RETURN(Tensor w8_bytes, Tensor::Empty(*pool, DType::kU8,
                                                  {MoeFp8ExpertBytes(s.experts, i, h)}));
  int64_t w8_off = 0;
  MoeLayerWeights w8;
  w8.router = router;
  w8.experts8 = CarveMoeFp8Experts(w8_bytes.data(), &w8_off, s.experts, i, h, Device::Cuda(0));
  RETURN_IF_ERROR(QuantizeMoeFp8Experts({gate_up, down}, w8.experts8, nullptr));
  RETURN_IF_ERROR(TimeFp8Experts(s, gemm.get(), *pool, w8.experts8, offsets, rows_x, tokens,
                                 want, ceiling, flops, bf16_ms, bf16_gathered_ms));

  ASSIGN_OR_RETURN(const double block_ms, TimeMs(nullptr, s.iters, 2, [&] {
    return layer->Forward(gemm.get(), w, x, hidden, nullptr);
  }));
  const double block_flops = flops + 2.0 * static_cast<double>(t * s.experts * h);
  std::printf("whole MoE block (router .. combine, one host sync, experts: %s): %.3f ms, "
              "%.1f TFLOP/s, %.1f us per 1k tokens\n",
              MoeExpertsPathName(layer->last_path()), block_ms, block_flops / block_ms * 1e-9,
              block_ms * 1e3 / (static_cast<double>(t) / 1e3));
  MoeLayerShape fp8_shape = shape;
  fp8_shape.fp8 = true;
  ASSIGN_OR_RETURN(std::unique_ptr<MoeLayer> fp8_layer,
                   MoeLayer::Create(fp8_shape, t, *pool, nullptr));
  ASSIGN_OR_RETURN(const double fp8_ms, TimeMs(nullptr, s.iters, 2, [&] {
    return fp8_layer->Forward(gemm.get(), w8, x, hidden, nullptr);
  }));
  std::printf("whole MoE block, fp8 experts (row-wise, %s): %.3f ms, %.1f us per 1k tokens, "
              "%.2fx the bf16 block\n", MoeExpertsPathName(fp8_layer->last_path()), fp8_ms,
              fp8_ms * 1e3 / (static_cast<double>(t) / 1e3), block_ms / fp8_ms);
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
