// `tandem-bench target`: the frozen Qwen3 target forward at Qwen3-8B shape with random
// weights (made on the device; no checkpoint needed): 16384 packed tokens as 4 documents x
// 4096, capturing the 5 DFlash layers [1, 9, 17, 25, 33], so the forward stops after layer
// 33 and computes no logits. Reports tok/s, achieved TFLOP/s and MFU against a cuBLAS bf16
// 8192^3 GEMM measured in the same run, and peak memory; then the same work in HF
// transformers (bench/target_peer.py: eager and torch.compile, 4 x 4096 batch with a causal
// mask, hooks on the captured layers) and the ratios. Bars: >= 1.15x transformers eager and
// >= 66% of the GEMM rate.
// --precision=fp8 runs the same forward with block-scaled e4m3 projections (weights
// quantized from the same random bf16 weights) right after the bf16 one, and reports the
// speedup (bar >= 1.6x bf16), the FP8 projection GEMM rates against a block-scaled FP8
// 8192^3 GEMM measured in the same run, what the power limit allows (the projection FLOPs
// at the bf16 and FP8 8192^3 rates sustained ~2 s each, what each forward spends beyond that
// floor, and the ratio bound that follows), the weight memory, and the fidelity of each
// captured layer (per-token cosine, relative L2) against the bf16 forward's.
// Args: --no-peer, --peer-modes=eager,compile[,eager_attn], --tokens=N, --docs=N,
//       --iters=N, --peer=PATH, --precision=bf16|fp8, --profile (one more fp8 forward inside
//       cudaProfilerStart/Stop, for `ncu --profile-from-start off`).
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/bench_util.h"
#include "bench/gpu_power.h"
#include "bench/target_bench.h"
#include "bench/target_fp8.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include "kernels/core/device_pools.h"
#include "kernels/core/stream.h"
#include "models/dflash/dflash_config.h"
#include "models/qwen3/qwen3_target.h"
#endif

namespace tandem::bench {

#ifdef TANDEM_HAVE_CUDA
models::TransformerConfig Qwen3_8bConfig() {
  models::TransformerConfig c;
  c.model_type = "qwen3";
  c.vocab_size = 151936;
  c.hidden_size = 4096;
  c.num_hidden_layers = 36;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 8;
  c.head_dim = 128;
  c.rotary_dim = 128;
  c.intermediate_size = 12288;
  c.max_position_embeddings = 40960;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1e6;
  c.layer_types.assign(36, models::LayerType::kFullAttention);
  return c;
}

models::DFlashConfig Qwen3_8bDrafterConfig(int layers) {
  const models::TransformerConfig target = Qwen3_8bConfig();
  models::DFlashConfig c;
  c.layers = target;
  c.layers.architectures = {"DFlashDraftModel"};
  c.layers.num_hidden_layers = layers;
  c.layers.layer_types.assign(layers, models::LayerType::kSlidingAttention);
  c.layers.layer_types.back() = models::LayerType::kFullAttention;
  c.layers.sliding_window = 2048;
  c.block_size = 16;
  c.mask_token_id = 151669;
  c.num_target_layers = target.num_hidden_layers;
  c.target_layer_ids = models::DFlashTargetLayerIds(target.num_hidden_layers, 5);
  return c;
}
#endif

namespace {

#ifdef TANDEM_HAVE_CUDA
using kernels::DType;
using kernels::Tensor;
using kernels::TensorView;
using models::TransformerConfig;

#define TARGET_BENCH_OK(expr)                                                         \
  do {                                                                                \
    Status _s = (expr);                                                               \
    if (!_s.ok()) {                                                                   \
      std::fprintf(stderr, "target bench: %s\n", _s.ToString().c_str());              \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)


struct ForwardResult {
  bool fp8 = false;
  double ms = 0;
  int64_t peak_bytes = 0, weight_bytes = 0, workspace_bytes = 0, device_bytes = 0;
  std::vector<std::vector<kernels::bf16>> captures;  // one [tokens, H] per capture layer
};

// Builds the target at `precision` from the seed-1 random weights, times `iters` forwards
// and copies the captured layers of the last one to the host; frees the target.
Result<ForwardResult> RunForward(const TransformerConfig& cfg, const std::vector<int>& layers,
                                 int64_t tokens, int64_t docs, int iters,
                                 models::TargetPrecision precision,
                                 const kernels::CudaStream& stream, bool profile = false) {
  ForwardResult out;
  out.fp8 = precision == models::TargetPrecision::kFp8;
  kernels::DevicePools pools;  // this run's own: everything goes back to CUDA at return
  ASSIGN_OR_RETURN(kernels::CachingPool * pool_ptr, pools.Pool(0));
  kernels::CachingPool& pool = *pool_ptr;
  size_t free0 = 0, total = 0;
  cudaMemGetInfo(&free0, &total);
  pool.ResetHighWater();
  ASSIGN_OR_RETURN(std::unique_ptr<models::Qwen3Target> target,
                   models::Qwen3Target::Random(cfg, pool, 1,
                                               {.max_tokens = tokens, .stream = stream.get(),
                                                .precision = precision}));
  out.weight_bytes = target->weight_bytes();
  out.workspace_bytes = target->workspace_bytes();
  const int64_t doc_len = tokens / docs;
  // Batch: docs x doc_len tokens, positions restarting per document.
  std::vector<int32_t> ids(tokens), pos(tokens), cu(docs + 1);
  for (int64_t i = 0; i < tokens; ++i) {
    ids[i] = static_cast<int32_t>((i * 2654435761u) % cfg.vocab_size);
    pos[i] = static_cast<int32_t>(i % doc_len);
  }
  for (int64_t d = 0; d <= docs; ++d) cu[d] = static_cast<int32_t>(d * doc_len);
  auto upload = [&](const std::vector<int32_t>& h) -> Result<Tensor> {
    ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(pool, DType::kI32, {static_cast<int64_t>(h.size())},
                                             stream.get()));
    RETURN_IF_ERROR(kernels::CopyFromHost(t, h.data(), stream.get()));
    return t;
  };
  ASSIGN_OR_RETURN(Tensor ids_t, upload(ids));
  ASSIGN_OR_RETURN(Tensor pos_t, upload(pos));
  ASSIGN_OR_RETURN(Tensor cu_t, upload(cu));
  std::vector<Tensor> bufs;
  std::vector<models::LayerCapture> caps;
  for (int l : layers) {
    ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(pool, DType::kBF16, {tokens, cfg.hidden_size},
                                             stream.get()));
    bufs.push_back(std::move(t));
    caps.push_back({l, bufs.back().view()});
  }
  const models::PackedBatch batch{ids_t, pos_t, cu_t, static_cast<int>(doc_len)};
  RETURN_IF_ERROR(target->Forward(batch, caps));
  ASSIGN_OR_RETURN(out.ms, TimeMs(stream.get(), iters, 2, [&] { return target->Forward(batch, caps); }));
  RETURN_IF_ERROR(stream.Synchronize());
  if (profile) {  // one more forward inside a profiler range (ncu --profile-from-start off)
    cudaProfilerStart();
    RETURN_IF_ERROR(target->Forward(batch, caps));
    RETURN_IF_ERROR(stream.Synchronize());
    cudaProfilerStop();
  }
  size_t free1 = 0;
  cudaMemGetInfo(&free1, &total);
  out.device_bytes = static_cast<int64_t>(free0) - static_cast<int64_t>(free1);
  out.peak_bytes = pool.stats().high_water_in_use;
  for (const Tensor& b : bufs) {
    out.captures.emplace_back(static_cast<size_t>(b.view().numel()));
    RETURN_IF_ERROR(kernels::CopyToHost(out.captures.back().data(), b.view(), stream.get()));
  }
  RETURN_IF_ERROR(stream.Synchronize());
  return out;
}

// The fp8 lines: speedup and its bar, GEMM rates against the FP8 8192^3 ceiling, fidelity.
// What the power limit leaves for the 1.6x bar: the forwards' projection FLOPs at the bf16
// and FP8 8192^3 rates sustained for ~2 s each (at the board's power limit, as the forwards
// run), and what each forward spends beyond that floor (attention, norms, RoPE, SwiGLU and
// the e4m3 producers; attention is bf16 in both). The bound is the ratio if the fp8 forward's
// GEMMs ran at the sustained rate and the rest cost what it costs in bf16.
void ReportPowerBound(const TransformerConfig& cfg, const std::vector<int>& layers,
                      int64_t tokens, const ForwardResult& bf16, const ForwardResult& fp8,
                      kernels::GemmContext* ctx, const kernels::CudaStream& stream) {
  const int64_t h = cfg.hidden_size, q = cfg.q_dim(), kv = cfg.kv_dim(), ff = cfg.intermediate_size;
  const double gemm_flops = (layers.back() + 1) * 2.0 * static_cast<double>(tokens) *
                            static_cast<double>(h * (q + 2 * kv) + q * h + 3 * h * ff);
  auto power = PowerSampler::Start(0);
  const Result<double> bf16_rate = GemmCeilingTflops(stream.get(), 1500);
  const std::string bf16_power = power.ok() ? (*power)->Stop().ToString() : "power: n/a";
  power = PowerSampler::Start(0);
  const Result<double> fp8_rate = Fp8GemmTflops(ctx, 8192, 8192, 8192, stream.get(), 2500);
  const std::string fp8_power = power.ok() ? (*power)->Stop().ToString() : "power: n/a";
  if (!bf16_rate.ok() || !fp8_rate.ok()) {
    std::printf("power bound: %s\n",
                (bf16_rate.ok() ? fp8_rate.status() : bf16_rate.status()).ToString().c_str());
    return;
  }
  const double bf16_floor = gemm_flops / *bf16_rate / 1e9, fp8_floor = gemm_flops / *fp8_rate / 1e9;
  const double bf16_rest = bf16.ms - bf16_floor, fp8_rest = fp8.ms - fp8_floor;
  std::printf("sustained 8192^3 (~2 s each): bf16 %.1f TFLOP/s (%s); fp8 %.1f TFLOP/s (%s)\n",
              *bf16_rate, bf16_power.c_str(), *fp8_rate, fp8_power.c_str());
  std::printf("projection GEMMs %.1f TFLOP: floor bf16 %.1f ms, fp8 %.1f ms; beyond the floor: "
              "bf16 %.1f ms, fp8 %.1f ms\n",
              gemm_flops / 1e12, bf16_floor, fp8_floor, bf16_rest, fp8_rest);
  std::printf("fp8 bound at the sustained rates (fp8 floor + bf16's rest): %.1f ms = %.2fx bf16; "
              "1.6x would need %.1f ms beyond the fp8 floor\n",
              fp8_floor + bf16_rest, bf16.ms / (fp8_floor + bf16_rest),
              bf16.ms / 1.6 - fp8_floor);
}

void ReportFp8(const TransformerConfig& cfg, const std::vector<int>& layers, int64_t tokens,
               const ForwardResult& bf16, const ForwardResult& fp8, double bf16_ceiling,
               const kernels::CudaStream& stream) {
  const double speedup = bf16.ms / fp8.ms;
  std::printf("bar fp8 >= 1.6x tandem bf16: %s (%.2fx: %.0f vs %.0f tok/s)\n",
              speedup >= 1.6 ? "met" : "MISSED", speedup, tokens / fp8.ms * 1e3,
              tokens / bf16.ms * 1e3);
  auto ctx = kernels::GemmContext::Create(0);
  if (!ctx.ok()) {
    std::printf("fp8 GEMM rates: %s\n", ctx.status().ToString().c_str());
    return;
  }
  const Result<double> ceil8 = Fp8GemmTflops(ctx->get(), 8192, 8192, 8192, stream.get(), 20);
  std::printf("ceiling: block-scaled FP8 8192^3 (cuBLASLt VEC128/BLK128x128) %.1f TFLOP/s "
              "(bf16 8192^3 %.1f, ratio %.2f)\n",
              ceil8.ok() ? *ceil8 : 0.0, bf16_ceiling, ceil8.ok() ? *ceil8 / bf16_ceiling : 0.0);
  const int64_t h = cfg.hidden_size, q = cfg.q_dim(), kv = cfg.kv_dim(), ff = cfg.intermediate_size;
  struct Shape3 { const char* name; int64_t n, k; };
  const Shape3 shapes[] = {{"q_proj", q, h}, {"k/v_proj", kv, h}, {"o_proj", h, q},
                           {"gate_up", 2 * ff, h}, {"down", h, ff}};
  std::printf("%-10s %7s %7s %7s %12s %12s %9s\n", "GEMM", "M", "N", "K", "bf16 TF/s",
              "fp8 TF/s", "fp8/ceil");
  for (const Shape3& sh : shapes) {
    const Result<double> b = Bf16GemmTflops(ctx->get(), tokens, sh.n, sh.k, stream.get(), 10);
    const Result<double> f = Fp8GemmTflops(ctx->get(), tokens, sh.n, sh.k, stream.get(), 10);
    std::printf("%-10s %7ld %7ld %7ld %12.1f %12.1f %8.1f%%\n", sh.name, tokens, sh.n, sh.k,
                b.ok() ? *b : 0.0, f.ok() ? *f : 0.0,
                f.ok() && ceil8.ok() ? 100 * *f / *ceil8 : 0.0);
  }
  ReportPowerBound(cfg, layers, tokens, bf16, fp8, ctx->get(), stream);
  std::printf("fidelity of tandem fp8 captures against tandem bf16 (same weights and tokens):\n");
  std::printf("%-8s %12s %12s %12s\n", "layer", "mean cos", "min cos", "rel L2");
  for (size_t i = 0; i < layers.size(); ++i) {
    const CaptureFidelity f = CompareCapture(fp8.captures[i], bf16.captures[i], tokens, h);
    std::printf("%-8d %12.6f %12.6f %12.5f\n", layers[i], f.mean_cos, f.min_cos, f.rel_l2);
  }
}

int RunTarget(const std::vector<std::string>& args) {
  bool peer = true;
  bool profile = false;
  int64_t tokens = 16384, docs = 4;
  int iters = 10;
  std::string peer_modes = "eager,compile";
  std::string peer_path = TANDEM_TARGET_PEER;
  models::TargetPrecision precision = models::TargetPrecision::kBf16;
  for (const std::string& a : args) {
    if (a == "--no-peer") peer = false;
    else if (a == "--profile") profile = true;
    else if (a.rfind("--precision=", 0) == 0) {
      auto p = models::ParseTargetPrecision(a.substr(12));
      if (!p.ok()) {
        std::fprintf(stderr, "target bench: %s\n", p.status().ToString().c_str());
        return 2;
      }
      precision = *p;
    }
    else if (a.rfind("--peer-modes=", 0) == 0) peer_modes = a.substr(13);
    else if (a.rfind("--tokens=", 0) == 0) tokens = std::stoll(a.substr(9));
    else if (a.rfind("--docs=", 0) == 0) docs = std::stoll(a.substr(7));
    else if (a.rfind("--iters=", 0) == 0) iters = std::stoi(a.substr(8));
    else if (a.rfind("--peer=", 0) == 0) peer_path = a.substr(7);
    else {
      std::fprintf(stderr, "target bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (docs < 1 || tokens % docs != 0) {
    std::fprintf(stderr, "target bench: --tokens must be a multiple of --docs\n");
    return 2;
  }
  if (kernels::CudaDeviceCount() == 0) {
    std::printf("target: skipped (no CUDA device visible)\n");
    return 0;
  }
  const TransformerConfig cfg = Qwen3_8bConfig();
  std::vector<int> layers;
  for (int64_t l : models::DFlashTargetLayerIds(cfg.num_hidden_layers, 5))
    layers.push_back(static_cast<int>(l));
  const int64_t doc_len = tokens / docs;

  // The peer runs first, in its own process, so the two never share the GPU's memory.
  nlohmann::json pj;
  if (peer) {
    std::string layer_arg;
    for (int l : layers) layer_arg += (layer_arg.empty() ? "" : ",") + std::to_string(l);
    pj = RunPeer(peer_path, "--docs=" + std::to_string(docs) + " --doc-len=" +
                                std::to_string(doc_len) + " --layers=" + layer_arg +
                                " --iters=" + std::to_string(iters) + " --modes=" + peer_modes,
                 "torch, transformers");
  }

  auto stream_or = kernels::CudaStream::Create(0);
  TARGET_BENCH_OK(stream_or.status());
  const kernels::CudaStream stream = std::move(*stream_or);
  const Result<double> ceiling_or = GemmCeilingTflops(stream.get());
  TARGET_BENCH_OK(ceiling_or.status());
  const double ceiling = *ceiling_or;

  std::optional<ForwardResult> bf16_run;
  {
    auto r = RunForward(cfg, layers, tokens, docs, iters, models::TargetPrecision::kBf16, stream);
    TARGET_BENCH_OK(r.status());
    bf16_run = std::move(*r);
  }
  std::optional<ForwardResult> fp8_run;
  if (precision == models::TargetPrecision::kFp8) {
    auto r = RunForward(cfg, layers, tokens, docs, iters, models::TargetPrecision::kFp8, stream,
                        profile);
    TARGET_BENCH_OK(r.status());
    fp8_run = std::move(*r);
  }
  const double ms = bf16_run->ms;
  // FLOPs actually executed: layers 0..33, linear layers plus causal attention (QK^T and PV
  // over the lower triangle, counted once).
  const int64_t run_layers = layers.back() + 1, h = cfg.hidden_size, q = cfg.q_dim(),
                kv = cfg.kv_dim(), ff = cfg.intermediate_size;
  const double linear = 2.0 * tokens * (h * (q + 2 * kv) + q * h + 3 * h * ff);
  const double attn = docs * 2.0 * cfg.num_attention_heads * cfg.head_dim *
                      static_cast<double>(doc_len) * (doc_len + 1);
  const double flops = run_layers * (linear + attn);
  const double tflops = flops / ms / 1e9;
  const double mfu = tflops / ceiling;
  const double gib = 1024.0 * 1024 * 1024;

  std::printf("ceiling: cuBLAS bf16 8192^3 GEMM %.1f TFLOP/s\n", ceiling);
  std::printf("target: Qwen3-8B shape, %ld tokens = %ld docs x %ld, capture layers", tokens, docs,
              doc_len);
  for (int l : layers) std::printf(" %d", l);
  std::printf(" (runs %ld of %ld layers, no LM head)\n", run_layers, cfg.num_hidden_layers);
  std::printf("%-26s %10s %11s %9s %7s %12s %12s\n", "impl", "ms", "tok/s", "TFLOP/s", "MFU",
              "peak GiB", "act GiB");
  for (const std::optional<ForwardResult>* r : {&bf16_run, &fp8_run}) {
    if (!r->has_value()) continue;
    const ForwardResult& f = **r;
    std::printf("%-26s %10.2f %11.0f %9.1f %6.1f%% %12.2f %12.2f\n",
                f.fp8 ? "tandem fp8" : "tandem", f.ms, tokens / f.ms * 1e3, flops / f.ms / 1e9,
                100 * flops / f.ms / 1e9 / ceiling, f.peak_bytes / gib,
                (f.peak_bytes - f.weight_bytes) / gib);
    std::printf("  (%s: weights %.2f GiB; device memory incl. cuBLASLt/cuDNN workspaces %.2f "
                "GiB; activation workspace %.2f GiB)\n",
                f.fp8 ? "fp8" : "bf16", f.weight_bytes / gib, f.device_bytes / gib,
                f.workspace_bytes / gib);
  }
  if (fp8_run) ReportFp8(cfg, layers, tokens, *bf16_run, *fp8_run, ceiling, stream);
  double eager_ms = 0;
  for (const char* mode : {"eager", "compile", "eager_attn"}) {
    if (!pj.contains(mode)) continue;
    const nlohmann::json& m = pj[mode];
    const double pms = m.value("ms", 0.0);
    if (pms <= 0) continue;
    if (std::string(mode) == "eager") eager_ms = pms;
    const double peak = m.value("peak_bytes", 0.0), wb = m.value("weight_bytes", 0.0);
    std::printf("%-26s %10.2f %11.0f %9.1f %6.1f%% %12.2f %12.2f   tandem %.2fx\n",
                ("transformers " + std::string(mode)).c_str(), pms, tokens / pms * 1e3,
                flops / pms / 1e9, 100 * flops / pms / 1e9 / ceiling, peak / gib,
                (peak - wb) / gib, pms / ms);
  }
  if (pj.contains("versions")) std::printf("peer: %s\n", pj["versions"].dump().c_str());
  std::printf("bar >= 66%% of GEMM rate: %s (%.1f%%)\n", mfu >= 0.66 ? "met" : "MISSED",
              100 * mfu);
  if (eager_ms > 0)
    std::printf("bar >= 1.15x transformers eager: %s (%.2fx)\n",
                eager_ms / ms >= 1.15 ? "met" : "MISSED", eager_ms / ms);
  return 0;
}
#else
int RunTarget(const std::vector<std::string>&) {
  std::printf("target: skipped (built without CUDA)\n");
  return 0;
}
#endif

}  // namespace

TANDEM_BENCH("target", "forward",
             "Qwen3-8B-shaped target forward, 16384 tokens (4x4096), 5 captured layers, vs "
             "transformers eager / torch.compile",
             RunTarget);

}  // namespace tandem::bench
