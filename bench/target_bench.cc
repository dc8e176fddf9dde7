// `tandem-bench target`: the frozen Qwen3 target forward at Qwen3-8B shape with random
// weights (made on the device; no checkpoint needed): 16384 packed tokens as 4 documents x
// 4096, capturing the 5 DFlash layers [1, 9, 17, 25, 33], so the forward stops after layer
// 33 and computes no logits. Reports tok/s, achieved TFLOP/s and MFU against a cuBLAS bf16
// 8192^3 GEMM measured in the same run, and peak memory; then the same work in HF
// transformers (bench/target_peer.py: eager and torch.compile, 4 x 4096 batch with a causal
// mask, hooks on the captured layers) and the ratios. Bars: >= 1.15x transformers eager and
// >= 66% of the GEMM rate.
// Args: --no-peer, --peer-modes=eager,compile[,eager_attn], --tokens=N, --docs=N,
//       --iters=N, --peer=PATH.
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/bench_util.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/core/stream.h"
#include "models/dflash/dflash_config.h"
#include "models/qwen3/qwen3_target.h"
#endif

namespace tandem::bench {
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

TransformerConfig Qwen3_8bConfig() {
  TransformerConfig c;
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

int RunTarget(const std::vector<std::string>& args) {
  bool peer = true;
  int64_t tokens = 16384, docs = 4;
  int iters = 10;
  std::string peer_modes = "eager,compile";
  std::string peer_path = TANDEM_TARGET_PEER;
  for (const std::string& a : args) {
    if (a == "--no-peer") peer = false;
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

  size_t free0 = 0, total = 0;
  cudaMemGetInfo(&free0, &total);
  auto weights = models::Qwen3Weights::Random(cfg, kernels::Device::Cuda(0), 1, stream.get());
  TARGET_BENCH_OK(weights.status());
  const int64_t weight_bytes = weights->nbytes();
  auto target_or = models::Qwen3Target::Create(std::move(*weights),
                                               {.max_tokens = tokens, .stream = stream.get()});
  TARGET_BENCH_OK(target_or.status());
  models::Qwen3Target& target = **target_or;
  auto pool_or = kernels::CudaPool(0);
  TARGET_BENCH_OK(pool_or.status());
  kernels::CachingPool& pool = **pool_or;

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
  auto ids_t = upload(ids), pos_t = upload(pos), cu_t = upload(cu);
  TARGET_BENCH_OK(ids_t.status());
  TARGET_BENCH_OK(pos_t.status());
  TARGET_BENCH_OK(cu_t.status());
  std::vector<Tensor> bufs;
  std::vector<models::LayerCapture> caps;
  for (int l : layers) {
    auto t = Tensor::Empty(pool, DType::kBF16, {tokens, cfg.hidden_size}, stream.get());
    TARGET_BENCH_OK(t.status());
    bufs.push_back(std::move(*t));
    caps.push_back({l, bufs.back().view()});
  }
  const models::PackedBatch batch{*ids_t, *pos_t, *cu_t, static_cast<int>(doc_len)};
  pool.ResetHighWater();

  Status first = target.Forward(batch, caps);
  TARGET_BENCH_OK(first);
  const Result<double> ms_or =
      TimeMs(stream.get(), iters, 2, [&] { return target.Forward(batch, caps); });
  TARGET_BENCH_OK(ms_or.status());
  const double ms = *ms_or;
  TARGET_BENCH_OK(stream.Synchronize());
  size_t free1 = 0;
  cudaMemGetInfo(&free1, &total);

  // FLOPs actually executed: layers 0..33, linear layers plus causal attention (QK^T and PV
  // over the lower triangle, counted once).
  const int64_t run_layers = layers.back() + 1, h = cfg.hidden_size, q = cfg.q_dim(),
                kv = cfg.kv_dim(), ff = cfg.intermediate_size;
  const double linear = 2.0 * tokens * (h * (q + 2 * kv) + q * h + 3 * h * ff);
  const double attn = docs * 2.0 * cfg.num_attention_heads * cfg.head_dim *
                      static_cast<double>(doc_len) * (doc_len + 1);
  const double flops = run_layers * (linear + attn);
  const double tflops = flops / ms / 1e9, tok_s = tokens / ms * 1e3;
  const double mfu = tflops / ceiling;
  const kernels::AllocatorStats st = pool.stats();
  const double gib = 1024.0 * 1024 * 1024;

  std::printf("ceiling: cuBLAS bf16 8192^3 GEMM %.1f TFLOP/s\n", ceiling);
  std::printf("target: Qwen3-8B shape, %ld tokens = %ld docs x %ld, capture layers", tokens, docs,
              doc_len);
  for (int l : layers) std::printf(" %d", l);
  std::printf(" (runs %ld of %ld layers, no LM head)\n", run_layers, cfg.num_hidden_layers);
  std::printf("%-26s %10s %11s %9s %7s %12s %12s\n", "impl", "ms", "tok/s", "TFLOP/s", "MFU",
              "peak GiB", "act GiB");
  std::printf("%-26s %10.2f %11.0f %9.1f %6.1f%% %12.2f %12.2f\n", "tandem", ms, tok_s, tflops,
              100 * mfu, st.high_water_in_use / gib,
              (st.high_water_in_use - weight_bytes) / gib);
  std::printf("  (tandem device memory incl. cuBLASLt/cuDNN workspaces: %.2f GiB; "
              "activation workspace %.2f GiB)\n",
              (static_cast<double>(free0) - free1) / gib, target.workspace_bytes() / gib);
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
