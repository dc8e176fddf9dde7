// `tandem-bench hybrid`: the Qwen3.5 / Qwen3.6 hybrid target's parts on the GPU, each next to
// its PyTorch peer (bench/hybrid_peer.py: flash-linear-attention's Triton kernels and HF
// transformers' Qwen3_5 text model) in the same command.
//   gdr:     the gated delta rule on [16384 tokens = 4 x 4096, 16 key / 48 value heads of
//            128], q/k L2-normalised in the kernel: tandem's chunked tensor-core kernel and
//            its recurrent kernel vs fla's chunk_gated_delta_rule with cu_seqlens; also the
//            largest difference between the chunked and recurrent outputs.
//   attn256: the gated attention layer's causal varlen attention (24 / 4 heads of 256,
//            4 x 4096) through cuDNN's fused SDPA (backend kCudnn: an error if cuDNN has no
//            engine) and the own fallback kernel.
//   forward: the hybrid body at the real 27B layer shape (hidden 5120, MLP 17408; `--layers`
//            layers, default 4 = three Gated DeltaNet + one gated attention; random weights),
//            16384 packed tokens as 4 x 4096, capturing the last layer (or `--capture`'s
//            layers: `--layers=62 --capture=1,16,31,46,61` is the whole 27B target as DFlash
//            runs it); vs HF + fla on the same layers as a [4, 4096] batch. Prints weights
//            and workspace bytes and the GEMM rate (projection FLOPs only) against the
//            cuBLAS 8192^3 ceiling. `--precision=bf16,fp8` times the target in each
//            precision in turn (fp8: block-scaled e4m3 projections) and prints the
//            ratio to the first; the peer runs once, against the first.
//            `--model=35b-a3b`: the Qwen3.6-35B-A3B MoE hybrid instead, built as
//            `tandem-bench pipeline --job=examples/qwen3.6-35b-a3b-1gpu.toml` builds it (the
//            job's target_config with random weights, its DFlash capture layers
//            [1, 10, 19, 28, 37]; `--job=PATH` reads another MoE hybrid job); prints the
//            expert-GEMM path the shape rule ran (MoeChooseExpertsPath) and the bar: the
//            whole target >= 2x HF + fla (transformers' Qwen3_5MoeTextModel with its fastest
//            experts implementation, measured by the peer). The GEMM rate counts the
//            active parameters (router, the k routed experts, the shared expert).
//            `--model=35b-a3b --precision=bf16,fp8` builds, times and frees the bf16 target,
//            then the FP8 one (routed and shared experts in e4m3, kernels/moe/experts_fp8.h),
//            and prints the FP8 / bf16 ratio against its bar (>= 1.4x).
// Both peers run the layers tandem runs: up to the last captured one.
// Args: --no-peer, --peer=PATH (hybrid_peer.py), --iters=N, --layers=N, --capture=I,J,..,
// --only=gdr|attn256|forward, --precision=P[,P], --model=27b|35b-a3b, --job=PATH.
// PYTHONPATH must reach fla for the peer (the device run puts the fla source on it).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench.h"
#include "bench/bench_util.h"
#include "bench/target_fp8.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "actors/dflash/target_model.h"
#include "actors/dflash/target_settings.h"
#include "runtime/job/job_spec.h"

#include "kernels/attention/attention.h"
#include "kernels/core/device_pools.h"
#include "kernels/core/memory.h"
#include "kernels/linear_attention/gated_delta_rule.h"
#include "kernels/linear_attention/gated_delta_rule_chunked.h"
#include "kernels/linear_attention/gated_delta_rule_chunked_kernels.h"
#include "kernels/moe/experts.h"
#include "models/qwen3_5/qwen3_5_config.h"
#include "models/qwen3_5/qwen3_5_target.h"
#include "models/qwen3_5/qwen3_5_weights.h"
#endif

namespace tandem::bench {
namespace {

#ifdef TANDEM_HAVE_CUDA
using kernels::DType;
using kernels::Tensor;
using kernels::TensorView;

struct Options {
  bool peer = true;
  std::string peer_path = TANDEM_HYBRID_PEER;
  int iters = 20;
  int layers = 0;            // 0: the model's default (27b: 4; 35b-a3b: the job's 40)
  std::vector<int> capture;  // --capture=1,16,31,46,61; empty: the model's default
  std::string only;
  std::string model = "27b";  // or "35b-a3b"
  std::string job = TANDEM_HYBRID_MOE_JOB;  // the 35b-a3b target's job file
  std::vector<models::TargetPrecision> precisions = {models::TargetPrecision::kBf16};
};

constexpr int64_t kTokens = 16384, kDocs = 4;

Result<Tensor> CuSeqlens(kernels::CachingPool& pool) {
  std::vector<int32_t> cu;
  for (int64_t d = 0; d <= kDocs; ++d) cu.push_back(static_cast<int32_t>(d * kTokens / kDocs));
  ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(pool, DType::kI32, {kDocs + 1}));
  RETURN_IF_ERROR(kernels::CopyFromHost(t.view(), cu.data(), nullptr));
  return t;
}

Status Gdr(const Options& o) {
  const int64_t hk = 16, hv = 48, d = 128;
  kernels::DevicePools pools;  // this run's own: everything goes back to CUDA at return
  ASSIGN_OR_RETURN(kernels::CachingPool * pool, pools.Pool(0));
  ASSIGN_OR_RETURN(Tensor q, RandomBf16(*pool, {kTokens, hk * d}, 1.f, 1, nullptr));
  ASSIGN_OR_RETURN(Tensor k, RandomBf16(*pool, {kTokens, hk * d}, 1.f, 2, nullptr));
  ASSIGN_OR_RETURN(Tensor v, RandomBf16(*pool, {kTokens, hv * d}, 1.f, 3, nullptr));
  // g = -exp(A_log) softplus(...) of a real layer is in about [-2, 0); beta in (0, 1).
  ASSIGN_OR_RETURN(Tensor gb, RandomBf16(*pool, {kTokens, hv}, 1.f, 4, nullptr));
  ASSIGN_OR_RETURN(Tensor g, Tensor::Empty(*pool, DType::kF32, {kTokens, hv}));
  ASSIGN_OR_RETURN(Tensor beta, Tensor::Empty(*pool, DType::kF32, {kTokens, hv}));
  {
    std::vector<float> hg(kTokens * hv), hb(kTokens * hv);
    for (size_t i = 0; i < hg.size(); ++i) {
      hg[i] = -0.05f - 1.5f * static_cast<float>((i * 2654435761u) % 1000) / 1000.f;
      hb[i] = 0.05f + 0.9f * static_cast<float>((i * 40503u) % 1000) / 1000.f;
    }
    RETURN_IF_ERROR(kernels::CopyFromHost(g.view(), hg.data(), nullptr));
    RETURN_IF_ERROR(kernels::CopyFromHost(beta.view(), hb.data(), nullptr));
  }
  ASSIGN_OR_RETURN(Tensor cu, CuSeqlens(*pool));
  ASSIGN_OR_RETURN(Tensor out_c, Tensor::Empty(*pool, DType::kBF16, {kTokens, hv * d}));
  ASSIGN_OR_RETURN(Tensor out_r, Tensor::Empty(*pool, DType::kF32, {kTokens, hv * d}));
  ASSIGN_OR_RETURN(Tensor ws, Tensor::Empty(*pool, DType::kU8,
                                            {kernels::GatedDeltaRuleChunkedWorkspaceBytes(
                                                kTokens, hk, hv, d, d)}));
  kernels::GatedDeltaRuleArgs a{q, k, v, g, beta, cu, out_c, hk, hv, d, d};
  const auto chunked = [&] { return kernels::GatedDeltaRuleChunkedForward(a, ws.view(), nullptr); };
  kernels::GatedDeltaRuleArgs r = a;
  r.out = out_r;
  const auto recurrent = [&] { return kernels::GatedDeltaRuleForward(r, nullptr); };
  ASSIGN_OR_RETURN(double ms_c, TimeMs(nullptr, o.iters, 3, chunked));
  ASSIGN_OR_RETURN(double ms_r, TimeMs(nullptr, std::max(3, o.iters / 4), 1, recurrent));
  // Kernel 1 alone (T diag(beta), masked Q K^T per chunk); the rest is kernel 2 (the state pass).
  const auto prepare = [&]() -> Status {
    if (kernels::LaunchGatedDeltaRuleChunked(
            out_c.data(), hv * d, false, q.data(), hk * d, k.data(), hk * d, v.data(), hv * d,
            g.view().data_as<float>(), hv, beta.view().data_as<float>(), hv,
            cu.view().data_as<int32_t>(), static_cast<int>(kDocs), kTokens, static_cast<int>(hk),
            static_cast<int>(hv), true, 1.f / std::sqrt(static_cast<float>(d)), ws.data(),
            nullptr, /*stages=*/1) != cudaSuccess)
      return InternalError("kernel 1 launch failed");
    return Status::Ok();
  };
  ASSIGN_OR_RETURN(double ms_k1, TimeMs(nullptr, o.iters, 3, prepare));
  // The two kernels on the same inputs: the chunked one (bf16 products) against fp32.
  std::vector<kernels::bf16> hc(kTokens * hv * d);
  std::vector<float> hr(kTokens * hv * d);
  RETURN_IF_ERROR(kernels::CopyToHost(hc.data(), out_c.view(), nullptr));
  RETURN_IF_ERROR(kernels::CopyToHost(hr.data(), out_r.view(), nullptr));
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < hr.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::abs(hc[i].f() - hr[i])));
    max_ref = std::max(max_ref, static_cast<double>(std::abs(hr[i])));
  }
  std::printf("gated delta rule [%lld tokens = %lld x %lld, %lld/%lld heads of %lld, l2norm]\n",
              (long long)kTokens, (long long)kDocs, (long long)(kTokens / kDocs), (long long)hk,
              (long long)hv, (long long)d);
  std::printf("  tandem chunked   %8.3f ms (kernel 1, per chunk: %.3f ms; kernel 2, the state "
              "pass: %.3f ms)\n  tandem recurrent %8.3f ms\n", ms_c, ms_k1, ms_c - ms_k1, ms_r);
  std::printf("  chunked vs recurrent: max |diff| %.3g (max |out| %.3g)\n", max_diff, max_ref);
  if (o.peer) {
    const nlohmann::json peer = RunPeer(o.peer_path, "gdr", "torch, triton, fla");
    const double fla = PeerNumber(peer, "fla_gdr_ms");
    if (fla > 0) std::printf("  fla chunk_gated_delta_rule %8.3f ms -> tandem chunked %.3fx fla\n",
                             fla, fla / ms_c);
  }
  return Status::Ok();
}

Status Attn256(const Options& o) {
  const int64_t hq = 24, hk = 4, d = 256;
  kernels::DevicePools pools;  // this run's own: everything goes back to CUDA at return
  ASSIGN_OR_RETURN(kernels::CachingPool * pool, pools.Pool(0));
  ASSIGN_OR_RETURN(Tensor q, RandomBf16(*pool, {kTokens, hq, d}, 1.f, 11, nullptr));
  ASSIGN_OR_RETURN(Tensor k, RandomBf16(*pool, {kTokens, hk, d}, 1.f, 12, nullptr));
  ASSIGN_OR_RETURN(Tensor v, RandomBf16(*pool, {kTokens, hk, d}, 1.f, 13, nullptr));
  ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(*pool, DType::kBF16, {kTokens, hq, d}));
  ASSIGN_OR_RETURN(Tensor cu, CuSeqlens(*pool));
  // Causal FLOPs: 4 d hq per visible (query, key) pair.
  const double pairs = kDocs * (kTokens / kDocs) * (kTokens / kDocs + 1) / 2.0;
  const double flops = 4.0 * d * hq * pairs;
  std::printf("causal varlen attention, %lld/%lld heads of %lld, %lld x %lld tokens\n",
              (long long)hq, (long long)hk, (long long)d, (long long)kDocs,
              (long long)(kTokens / kDocs));
  for (auto backend : {kernels::AttentionBackend::kCudnn, kernels::AttentionBackend::kFallback}) {
    ASSIGN_OR_RETURN(auto attn, kernels::CausalVarlenAttention::Create(0, backend));
    const auto fn = [&] {
      return attn->Forward(q, k, v, cu, static_cast<int>(kTokens / kDocs), 0.f, out, {}, nullptr);
    };
    Result<double> ms = TimeMs(nullptr, o.iters, 2, fn);
    const char* name = backend == kernels::AttentionBackend::kCudnn ? "cudnn" : "fallback";
    if (!ms.ok()) {
      std::printf("  %-8s error: %s\n", name, ms.status().ToString().c_str());
      continue;
    }
    std::printf("  %-8s %8.3f ms  %6.1f TFLOP/s (ran: %s)\n", name, *ms, flops / *ms / 1e9,
                attn->last_backend());
  }
  return Status::Ok();
}

// The 27B text config with `layers` layers (every 4th full attention).
Result<models::Qwen35Config> Config27B(int layers) {
  nlohmann::json j = {
      {"model_type", "qwen3_5_text"}, {"vocab_size", 248320}, {"hidden_size", 5120},
      {"intermediate_size", 17408}, {"num_hidden_layers", layers},
      {"full_attention_interval", 4}, {"num_attention_heads", 24}, {"num_key_value_heads", 4},
      {"head_dim", 256}, {"linear_num_key_heads", 16}, {"linear_num_value_heads", 48},
      {"linear_key_head_dim", 128}, {"linear_value_head_dim", 128},
      {"linear_conv_kernel_dim", 4}, {"rms_norm_eps", 1e-6}, {"tie_word_embeddings", false},
      {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 1e7},
                           {"partial_rotary_factor", 0.25}}}};
  return models::ParseQwen35Config(j, "hybrid_bench 27B config");
}

// The model a forward run times: its config (num_hidden_layers = the layers built), the
// captured layers and a name for the printout.
struct ForwardModel {
  models::Qwen35Config config;
  std::vector<int> capture;  // distinct, in range; the forward stops after the last
  std::string name;
  int run_layers() const { return *std::max_element(capture.begin(), capture.end()) + 1; }
};

Result<ForwardModel> Model27B(const Options& o) {
  ForwardModel m;
  const int layers = o.layers > 0 ? o.layers : 4;
  ASSIGN_OR_RETURN(m.config, Config27B(layers));
  m.capture = o.capture.empty() ? std::vector<int>{layers - 1} : o.capture;
  m.name = "27B layer shape";
  return m;
}

// The MoE hybrid as `tandem-bench pipeline --job=` builds it: the job's `dflash.target`
// group through ParseTargetModelSpec (target_config with model = "random"), its captured
// layers by the DFlash rule. `--layers` keeps the first N layers (and the captures below N).
Result<ForwardModel> Model35BA3B(const Options& o) {
  ASSIGN_OR_RETURN(const std::string text, ReadJobFile(o.job));
  ASSIGN_OR_RETURN(JobSpec job, ParseJobText(text, o.job));
  const ActorGroupSpec* tg = nullptr;
  for (const ActorGroupSpec& g : job.actors)
    if (g.class_name == "dflash.target") tg = &g;
  if (tg == nullptr) return InvalidArgumentError("hybrid: {} has no dflash.target group", o.job);
  ASSIGN_OR_RETURN(dflash::TargetModelSpec spec,
                   dflash::ParseTargetModelSpec(tg->settings, job.seed));
  if (!spec.hybrid || !spec.hybrid->moe)
    return InvalidArgumentError("hybrid: --model=35b-a3b needs a MoE hybrid target; {}'s "
                                "target is not one", o.job);
  if (spec.max_tokens != kTokens)
    return InvalidArgumentError("hybrid: {}'s max_tokens is {}, the bench runs {}", o.job,
                                spec.max_tokens, kTokens);
  ForwardModel m;
  m.config = *spec.hybrid;
  const int all = static_cast<int>(m.config.num_hidden_layers);
  const int layers = o.layers > 0 ? o.layers : all;
  if (layers > all)
    return InvalidArgumentError("hybrid: --layers={} but {}'s target has {}", layers, o.job, all);
  m.config.num_hidden_layers = layers;
  m.config.layer_types.resize(layers);
  if (!o.capture.empty()) {
    m.capture = o.capture;
  } else {
    for (int64_t id : spec.layer_ids)
      if (id < layers) m.capture.push_back(static_cast<int>(id));
    if (m.capture.empty()) m.capture.push_back(layers - 1);
  }
  m.name = fmt::format("Qwen3.6-35B-A3B MoE hybrid ({} experts of {}, top-{}, shared expert {}; "
                       "{}'s target_config)", m.config.moe->num_experts,
                       m.config.moe->moe_intermediate_size, m.config.moe->num_experts_per_tok,
                       m.config.moe->shared_expert_intermediate_size, o.job);
  return m;
}

// Times tandem's forward and prints its lines; every allocation (this run's own pools) goes
// back to CUDA at return, so the peer that runs next has the whole GPU.
Result<double> TandemForward(const Options& o, const ForwardModel& m,
                             models::TargetPrecision precision) {
  const models::Qwen35Config& c = m.config;
  const int layers = static_cast<int>(c.num_hidden_layers);
  kernels::DevicePools pools;
  ASSIGN_OR_RETURN(kernels::CachingPool * pool, pools.Pool(0));
  cudaStream_t stream = nullptr;
  if (cudaStreamCreate(&stream) != cudaSuccess) return InternalError("cudaStreamCreate");
  // As a job loads it: with fp8, quantized layer by layer (the load's peak is printed).
  ASSIGN_OR_RETURN(auto target,
                   models::Qwen35Target::Random(c, *pool, 7, {kTokens, stream, precision}));
  const int64_t load_peak = pool->stats().high_water_in_use;
  const int64_t weight_bytes = target->weights().nbytes() + target->fp8_projections().nbytes();
  std::vector<int32_t> ids(kTokens), pos(kTokens);
  for (int64_t i = 0; i < kTokens; ++i) {
    ids[i] = static_cast<int32_t>((i * 7919) % c.vocab_size);
    pos[i] = static_cast<int32_t>(i % (kTokens / kDocs));
  }
  ASSIGN_OR_RETURN(Tensor d_ids, Tensor::Empty(*pool, DType::kI32, {kTokens}));
  ASSIGN_OR_RETURN(Tensor d_pos, Tensor::Empty(*pool, DType::kI32, {kTokens}));
  RETURN_IF_ERROR(kernels::CopyFromHost(d_ids.view(), ids.data(), nullptr));
  RETURN_IF_ERROR(kernels::CopyFromHost(d_pos.view(), pos.data(), nullptr));
  ASSIGN_OR_RETURN(Tensor cu, CuSeqlens(*pool));
  std::vector<Tensor> caps;
  std::vector<models::HybridCapture> captures;
  for (int id : m.capture) {
    if (id < 0 || id >= layers)
      return InvalidArgumentError("hybrid: --capture layer {} is outside the {} layers", id,
                                  layers);
    ASSIGN_OR_RETURN(Tensor cap, Tensor::Empty(*pool, DType::kBF16, {kTokens, c.hidden_size}));
    captures.push_back({id, cap.view()});
    caps.push_back(std::move(cap));
  }
  const models::HybridBatch batch{d_ids, d_pos, cu, static_cast<int>(kTokens / kDocs)};
  const auto fn = [&] { return target->Forward(batch, captures); };
  ASSIGN_OR_RETURN(double ms, TimeMs(stream, o.iters, 2, fn));
  // GEMM FLOPs per token: 2 x the projection weights each token multiplies (for a MoE
  // block: the router, the k routed experts and the shared expert with its gate), over the
  // layers the forward runs.
  double params = 0;
  for (int64_t i = 0; i < m.run_layers(); ++i) {
    const bool linear = c.layer_types[i] == models::HybridLayerType::kLinearAttention;
    params += linear ? c.hidden_size * (c.conv_dim() + 2 * c.linear_value_dim() +
                                        2 * c.linear_num_value_heads)
                     : c.hidden_size * (3 * c.q_dim() + 2 * c.kv_dim());
    if (c.moe) {
      params += static_cast<double>(c.hidden_size) *
                (c.moe->num_experts + 3.0 * c.moe->num_experts_per_tok *
                                          c.moe->moe_intermediate_size +
                 3.0 * c.moe->shared_expert_intermediate_size + 1);
    } else {
      params += 3.0 * c.hidden_size * c.intermediate_size;
    }
  }
  const double tflops = 2 * params * kTokens / ms / 1e9;
  ASSIGN_OR_RETURN(double ceiling, GemmCeilingTflops(stream));
  std::printf("hybrid forward, %s, %d layers (%s), %lld tokens = %lld x %lld, "
              "%zu captured (%s): the forward runs %d layers\n", m.name.c_str(), layers,
              layers >= 4 ? "3 Gated DeltaNet : 1 gated attention" : "Gated DeltaNet",
              (long long)kTokens, (long long)kDocs, (long long)(kTokens / kDocs),
              m.capture.size(), fmt::format("{}", fmt::join(m.capture, ", ")).c_str(),
              m.run_layers());
  std::printf("  tandem %-4s %8.3f ms  %8.0f tok/s  GEMM %.1f TFLOP/s = %.1f%% of cuBLAS bf16 "
              "8192^3 %.1f%s\n", std::string(models::TargetPrecisionName(precision)).c_str(), ms,
              kTokens / ms * 1e3, tflops, 100 * tflops / ceiling, ceiling,
              c.moe ? " (active parameters)" : "");
  if (target->moe() != nullptr)
    std::printf("  expert GEMMs: the %s path (MoeChooseExpertsPath's pick for the last MoE "
                "layer of the last forward)\n",
                kernels::MoeExpertsPathName(target->moe()->last_path()));
  if (precision == models::TargetPrecision::kFp8) {
    // The FP8 forward's GEMM FLOPs against the block-scaled e4m3 8192^3 rate, same run.
    ASSIGN_OR_RETURN(auto ctx, kernels::GemmContext::Create(0));
    ASSIGN_OR_RETURN(double fp8_ceiling, Fp8GemmTflops(ctx.get(), 8192, 8192, 8192, stream, 20));
    std::printf("  fp8: GEMM FLOPs over the whole forward = %.1f%% of the block-scaled FP8 "
                "8192^3 rate %.1f TFLOP/s\n", 100 * tflops / fp8_ceiling, fp8_ceiling);
  }
  std::printf("  memory: weights %.2f GiB (incl. embedding + LM head %.2f GiB), workspace "
              "%.2f GiB\n", weight_bytes / 1073741824.0,
              2.0 * c.vocab_size * c.hidden_size * 2 / 1073741824.0,
              target->workspace_bytes() / 1073741824.0);
  std::printf("  device memory: %.2f GiB in use at the load's peak (the pool's high-water mark "
              "before the first forward)\n", load_peak / 1073741824.0);
  cudaStreamDestroy(stream);
  return ms;
}

Status Forward(const Options& o) {
  const bool moe = o.model == "35b-a3b";
  ForwardModel m;
  if (moe) {
    ASSIGN_OR_RETURN(m, Model35BA3B(o));
  } else {
    ASSIGN_OR_RETURN(m, Model27B(o));
  }
  std::vector<double> times;
  for (models::TargetPrecision p : o.precisions) {
    ASSIGN_OR_RETURN(const double t, TandemForward(o, m, p));
    times.push_back(t);
    if (times.size() > 1) {
      std::printf("  %s / %s: %.3fx\n", std::string(models::TargetPrecisionName(p)).c_str(),
                  std::string(models::TargetPrecisionName(o.precisions[0])).c_str(),
                  times[0] / t);
      if (moe && p == models::TargetPrecision::kFp8 &&
          o.precisions[0] == models::TargetPrecision::kBf16)
        std::printf("  bar: fp8 whole target >= 1.4x bf16: %s\n",
                    times[0] / t >= 1.4 ? "met" : "missed");
    }
  }
  const double ms = times[0];
  if (o.peer) {
    // The peer builds the layers tandem ran (up to the last captured one).
    const std::string args =
        moe ? fmt::format("forward-moe --layers={} --iters={}", m.run_layers(), o.iters)
            : fmt::format("forward --layers={}", m.run_layers());
    const nlohmann::json peer = RunPeer(o.peer_path, args, "torch, transformers, fla");
    const double hf = PeerNumber(peer, "hf_fla_forward_ms");
    if (hf > 0) {
      if (moe)
        std::printf("  HF: %d layers, experts_implementation \"%s\" (fastest of %s ms on "
                    "one layer's routing; transformers' default: %s), fla "
                    "chunk_gated_delta_rule calls per forward: %s\n",
                    m.run_layers(), peer.value("experts_implementation", "?").c_str(),
                    peer.contains("experts_ms") ? peer["experts_ms"].dump().c_str() : "?",
                    peer.value("experts_default", "?").c_str(),
                    peer.contains("fla_calls") ? peer["fla_calls"].dump().c_str() : "?");
      std::printf("  HF transformers + fla %8.3f ms %8.0f tok/s -> tandem %.3fx\n", hf,
                  kTokens / hf * 1e3, hf / ms);
      if (moe)
        std::printf("  bar: whole target >= 2x HF + fla: %s\n", hf / ms >= 2 ? "met" : "missed");
    }
  }
  return Status::Ok();
}

int Run(const std::vector<std::string>& args) {
  Options o;
  for (const std::string& a : args) {
    if (a == "--no-peer") o.peer = false;
    else if (a.rfind("--peer=", 0) == 0) o.peer_path = a.substr(7);
    else if (a.rfind("--iters=", 0) == 0) o.iters = std::stoi(a.substr(8));
    else if (a.rfind("--layers=", 0) == 0) o.layers = std::stoi(a.substr(9));
    else if (a.rfind("--only=", 0) == 0) o.only = a.substr(7);
    else if (a.rfind("--job=", 0) == 0) o.job = a.substr(6);
    else if (a.rfind("--model=", 0) == 0) {
      o.model = a.substr(8);
      if (o.model != "27b" && o.model != "35b-a3b") {
        std::fprintf(stderr, "hybrid: --model takes 27b or 35b-a3b, not \"%s\"\n",
                     o.model.c_str());
        return 2;
      }
    }
    else if (a.rfind("--precision=", 0) == 0) {
      o.precisions.clear();
      std::stringstream list(a.substr(12));
      for (std::string item; std::getline(list, item, ',');) {
        Result<models::TargetPrecision> p = models::ParseTargetPrecision(item);
        if (!p.ok()) {
          std::fprintf(stderr, "hybrid: --precision: %s\n", p.status().ToString().c_str());
          return 2;
        }
        o.precisions.push_back(*p);
      }
      if (o.precisions.empty()) {
        std::fprintf(stderr, "hybrid: --precision needs bf16 and/or fp8\n");
        return 2;
      }
    }
    else if (a.rfind("--capture=", 0) == 0) {
      std::stringstream list(a.substr(10));
      for (std::string item; std::getline(list, item, ',');) {
        if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos) {
          std::fprintf(stderr, "hybrid: --capture takes layer ids (1,16,31), not \"%s\"\n",
                       item.c_str());
          return 2;
        }
        o.capture.push_back(std::stoi(item));
      }
    }
    else {
      std::fprintf(stderr, "hybrid: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  int rc = 0;
  const std::pair<const char*, Status (*)(const Options&)> parts[] = {
      {"gdr", Gdr}, {"attn256", Attn256}, {"forward", Forward}};
  for (const auto& [name, fn] : parts) {
    if (!o.only.empty() && o.only != name) continue;
    const Status st = fn(o);
    std::fflush(stdout);
    if (!st.ok()) {
      std::printf("%s: error: %s\n", name, st.ToString().c_str());
      rc = 1;
    }
  }
  return rc;
}
#else
int Run(const std::vector<std::string>&) {
  std::printf("hybrid: needs a CUDA build\n");
  return 0;
}
#endif

}  // namespace

TANDEM_BENCH("hybrid", "all",
             "Qwen3.5 hybrid: gated delta rule, d256 attention, 27B-layer or 35B-A3B forward",
             Run);

}  // namespace tandem::bench
