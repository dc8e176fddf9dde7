// `tandem-bench drafter`: one DFlash training step (forward + weighted block loss + backward
// + grad clip + AdamW) at the Qwen3-8B drafter shape (hidden 4096, 5 layers, 32/8 heads of
// 128, intermediate 12288, vocab 151936 random frozen LM head, 512 anchors per 8192 tokens
// in 4 documents, window 2048 on the sliding layers) or, with `--shape=27b`, the Qwen3.6-27B
// drafter's (hidden 5120, MLP 17408, vocab 248320), next to the torch.compile'd PyTorch
// peer (bench/drafter_peer.py: flex_attention + create_block_mask, fp32 master + AdamW
// states, bf16 compute) when python3 imports torch. Prints step time, tokens/s and peak
// activation memory (pool high-water minus weights, grads, optimizer state and inputs), the
// board power and SM clock during tandem's timed steps (NVML), and each side's GEMM floor: its
// step's GEMM FLOPs at the cuBLAS rate sustained at the power limit, so what each side spends
// beyond its GEMMs can be read off. The products are the same except the LM head: tandem runs
// it on the rows with loss weight, the peer on every row.
// Then the same step with the optimizer overlapped with the next forward (a second stream,
// two priorities), interleaved with the serial order, each against the GEMM floor.
// With a second argument `stages`, it then times 3 more steps stage by stage (CUDA events
// between the drafter's stages) and prints where a step's time goes.
// With `--type=dflash2` it trains the DFlash2 drafter of the same shape instead
// (drafter_bench_dflash2.h) against the peer's DFlash2 step, and prints the selector's numbers.
// With `--lm-head=fp8` it first compares one step's loss and gradient with the FP8 LM head
// (lm_head_precision = "fp8") against the bf16 head's on the same inputs and parameters
// (relative errors), then times tandem with the FP8 head too, next to the same peer run (bar
// for the FP8 head: >= 1.25x the peer).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "bench/bench.h"
#include "bench/bench_util.h"
#include "bench/drafter_bench_dflash2.h"
#include "bench/target_bench.h"
#include "bench/gpu_power.h"
#include "kernels/core/device_pools.h"
#include "kernels/core/memory.h"
#include "kernels/random/philox.h"
#include "kernels/core/stream.h"
#include "kernels/loss/lm_head_ce_fp8.h"
#include "models/dflash/dflash_trainer.h"

namespace tandem::bench {
namespace {

using kernels::DType;
using kernels::Shape;
using kernels::Tensor;

constexpr int64_t kTokens = 8192, kDocs = 4, kAnchors = 512;

// The drafter the bench trains (`--shape`): the public DFlash drafters' shapes.
struct DrafterShape {
  std::string name;             // --shape value; also passed to the peer
  models::DFlashConfig config;  // hidden, heads, MLP, vocab, window, mask token, context
  int64_t id_range = 0;         // token ids are drawn below this
  int64_t hidden() const { return config.layers.hidden_size; }
  int64_t vocab() const { return config.layers.vocab_size; }
};

// Qwen3-8B: hidden 4096, 32/8 heads of 128, MLP 12288, vocab 151936, 36 target layers.
DrafterShape Shape8b() { return {"8b", Qwen3_8bDrafterConfig(5), 151000}; }

// Qwen3.6-27B: hidden 5120, 32/8 heads of 128, MLP 17408, vocab 248320, rope theta
// 1e7, mask token 248070, context from target layers 1, 16, 31, 46, 61 of 64; the same 4
// sliding (window 2048) + 1 full layers.
DrafterShape Shape27b() {
  models::DFlashConfig c = Qwen3_8bDrafterConfig(5);
  models::TransformerConfig& t = c.layers;
  t.hidden_size = 5120;
  t.intermediate_size = 17408;
  t.vocab_size = 248320;
  t.num_attention_heads = 32;
  t.num_key_value_heads = 8;
  t.head_dim = 128;
  t.rotary_dim = 128;
  t.rope_theta = 1e7;
  c.mask_token_id = 248070;
  c.num_target_layers = 64;
  c.target_layer_ids = {1, 16, 31, 46, 61};
  return {"27b", c, 247000};
}

// GEMM FLOPs of one training step over `rows` draft rows, `ctx` context tokens and
// `loss_rows` LM-head rows: per layer q/k/v/o and the MLP on the draft rows plus k/v on the
// context, each three times (forward, input grad, weight grad); the context projection fc
// forward and weight grad (the target's hidden states take no grad); the frozen LM head
// forward and input grad.
double StepGemmFlops(const models::DFlashConfig& c, int64_t rows, int64_t ctx, int64_t loss_rows) {
  const models::TransformerConfig& t = c.layers;
  const double h = t.hidden_size, q = t.num_attention_heads * t.head_dim,
               kv = t.num_key_value_heads * t.head_dim, inter = t.intermediate_size;
  const double layer = 2.0 * rows * h * (q + 2 * kv) + 2.0 * ctx * h * 2 * kv +
                       2.0 * rows * q * h + 2.0 * rows * h * 3 * inter;
  const double fc = 2.0 * ctx * (static_cast<double>(c.target_layer_ids.size()) * h) * h;
  const double lm_head = 2.0 * loss_rows * h * t.vocab_size;
  return 3 * t.num_hidden_layers * layer + 2 * fc + 2 * lm_head +
         DFlash2ExtraGemmFlops(c, rows, loss_rows);
}

// Times `steps` steps stage by stage and prints the mean ms of each stage kind, in total and
// per layer.
Status PrintStages(models::DFlashTrainer& trainer, const models::DFlashTargetHead& head,
                   const models::PackedBatchMeta& meta,
                   std::span<const kernels::TensorView> ctx, int steps) {
  models::DFlashDrafter& drafter = trainer.drafter();
  RETURN_IF_ERROR(drafter.EnableStageTiming());
  const int layers = static_cast<int>(drafter.config().layers.num_hidden_layers);
  std::vector<std::string> order;                  // stage kinds in first-seen order
  std::map<std::string, std::vector<double>> sums;  // kind -> [total, layer 0, layer 1, ...]
  std::set<std::string> layered;                    // kinds timed per layer
  for (int i = 0; i < steps; ++i) {
    RETURN_IF_ERROR(trainer.Step(head, meta, ctx));
    ASSIGN_OR_RETURN(std::vector<models::DFlashStageTime> times, drafter.StageTimes());
    for (const models::DFlashStageTime& t : times) {
      auto [it, fresh] = sums.try_emplace(t.stage, std::vector<double>(layers + 1, 0.0));
      if (fresh) order.push_back(t.stage);
      it->second[0] += t.ms / steps;
      if (t.layer >= 0 && t.layer < layers) {
        it->second[1 + t.layer] += t.ms / steps;
        layered.insert(t.stage);
      }
    }
  }
  double total = 0;
  for (const auto& [kind, v] : sums) total += v[0];
  std::printf("stage breakdown (mean of %d steps, GPU ms between events)\n%-20s %9s %6s", steps,
              "stage", "ms", "%");
  for (int l = 0; l < layers; ++l) std::printf(" %8s", fmt::format("L{}", l).c_str());
  std::printf("\n");
  for (const std::string& kind : order) {
    const std::vector<double>& v = sums[kind];
    std::printf("%-20s %9.2f %6.1f", kind.c_str(), v[0], 100.0 * v[0] / total);
    if (layered.contains(kind))
      for (int l = 0; l < layers; ++l) std::printf(" %8.2f", v[1 + l]);
    std::printf("\n");
  }
  std::printf("%-20s %9.2f\n", "total", total);
  return Status::Ok();
}

// How the optimizer step runs: serial on the drafter's stream (today's order), or
// overlapped with the next forward on a second stream of the given priority.
struct OptimizerMode {
  const char* name;
  bool overlap;
  int priority;  // lower = more urgent (cudaDeviceGetStreamPriorityRange)
};

// Times `steps` steps per mode, the modes interleaved over `rounds` rounds (the clock drifts
// as the board reaches its power limit), and returns each mode's mean step ms. The last step
// of a timed run joins the optimizer stream, so no update is left out of the time.
Result<std::vector<double>> TimeModes(models::DFlashTrainer& trainer,
                                      const models::DFlashTargetHead& head,
                                      const models::PackedBatchMeta& meta,
                                      std::span<const kernels::TensorView> ctx, int steps,
                                      std::span<const OptimizerMode> modes, int rounds) {
  models::DFlashDrafter& d = trainer.drafter();
  std::vector<double> mean(modes.size(), 0.0);
  for (int round = 0; round < rounds; ++round) {
    for (size_t m = 0; m < modes.size(); ++m) {
      RETURN_IF_ERROR(d.SetOptimizerOverlap(modes[m].overlap, modes[m].priority));
      RETURN_IF_ERROR(trainer.Step(head, meta, ctx));  // the mode's first step, untimed
      Result<std::unique_ptr<PowerSampler>> power = PowerSampler::Start(0);
      int i = 0;
      ASSIGN_OR_RETURN(const double ms, TimeMs(nullptr, steps, 0, [&]() -> Status {
                         RETURN_IF_ERROR(trainer.Step(head, meta, ctx));
                         return ++i == steps ? d.JoinOptimizer() : Status::Ok();
                       }));
      std::printf("  round %d, %-34s %8.2f ms  (%s)\n", round + 1, modes[m].name, ms,
                  power.ok() ? (*power)->Stop().ToString().c_str()
                             : power.status().ToString().c_str());
      mean[m] += ms / rounds;
    }
  }
  RETURN_IF_ERROR(d.SetOptimizerOverlap(false));
  return mean;
}

// The bench's inputs: embedding, LM head and 5 context layers (random), and the batch.
struct Inputs {
  Tensor embedding, lm_head;
  std::vector<Tensor> ctx;
  std::vector<kernels::TensorView> ctx_views;
  std::vector<int32_t> ids, pos, cu;
  std::vector<uint8_t> mask;
  models::PackedBatchMeta meta() const { return {ids, pos, cu, mask}; }
};

Result<Inputs> MakeInputs(kernels::CachingPool& pool, const DrafterShape& shape) {
  Inputs in;
  const int64_t h = shape.hidden(), v = shape.vocab();
  ASSIGN_OR_RETURN(in.embedding, RandomBf16(pool, Shape{v, h}, 1.0f, 1, nullptr));
  ASSIGN_OR_RETURN(in.lm_head, RandomBf16(pool, Shape{v, h}, 0.02f, 2, nullptr));
  for (size_t i = 0; i < shape.config.target_layer_ids.size(); ++i) {
    ASSIGN_OR_RETURN(Tensor c, RandomBf16(pool, Shape{kTokens, h}, 1.0f, 10 + i, nullptr));
    in.ctx_views.push_back(c);
    in.ctx.push_back(std::move(c));
  }
  in.ids.resize(kTokens);
  in.pos.resize(kTokens);
  in.mask.assign(kTokens, 1);
  for (int64_t i = 0; i < kTokens; ++i) {
    in.ids[i] = static_cast<int32_t>(kernels::PhiloxUniform(3, 0, i) *
                                     static_cast<double>(shape.id_range));
    in.pos[i] = static_cast<int32_t>(i % (kTokens / kDocs));
  }
  for (int64_t d = 0; d <= kDocs; ++d) in.cu.push_back(static_cast<int32_t>(d * kTokens / kDocs));
  return in;
}

Result<std::unique_ptr<models::DFlashTrainer>> MakeTrainer(kernels::Allocator& alloc,
                                                          const DrafterShape& shape,
                                                          bool lm_head_fp8) {
  models::DFlashTrainOptions o;
  o.max_tokens = kTokens;
  o.anchors_per_batch = kAnchors;
  o.total_steps = 1000;
  o.lm_head_fp8 = lm_head_fp8;
  ASSIGN_OR_RETURN(auto trainer,
                   models::DFlashTrainer::Create(shape.config, o, alloc, nullptr));
  RETURN_IF_ERROR(trainer->drafter().params().InitFromScratch(0, nullptr));
  return trainer;
}

// One forward + backward with the bf16 head and one with the FP8 head, same parameters,
// anchors, noise and inputs: the loss's relative error and the whole gradient's relative L2
// error, cosine and norm ratio (per-tensor errors: models/dflash/dflash_fp8_head_test.cc).
Status HeadFidelity(const DrafterShape& shape) {
  kernels::DevicePools pools;  // outlives the inputs and trainers below
  ASSIGN_OR_RETURN(kernels::CachingPool * pool_ptr, pools.Pool(0));
  kernels::CachingPool& pool = *pool_ptr;
  ASSIGN_OR_RETURN(Inputs in, MakeInputs(pool, shape));
  ASSIGN_OR_RETURN(kernels::Fp8LmHeadWeights q,
                   kernels::Fp8LmHeadWeights::Quantize(in.lm_head, pool, nullptr));
  std::vector<float> loss(2);
  std::vector<std::vector<float>> grads(2);
  for (int fp8 = 0; fp8 < 2; ++fp8) {
    ASSIGN_OR_RETURN(auto trainer, MakeTrainer(pool, shape, fp8 == 1));
    models::DFlashTargetHead head{in.embedding, in.lm_head};
    if (fp8) head.lm_head_fp8 = &q.head();
    RETURN_IF_ERROR(trainer->ForwardBackward(head, in.meta(), in.ctx_views));
    const models::DFlashParams& p = trainer->drafter().params();
    grads[fp8].resize(static_cast<size_t>(p.grads.numel()));
    RETURN_IF_ERROR(kernels::CopyToHost(grads[fp8].data(), p.grads, nullptr));
    RETURN_IF_ERROR(kernels::CopyToHost(&loss[fp8], trainer->drafter().loss(), nullptr));
    RETURN_IF_ERROR(kernels::SynchronizeStream(kernels::Device::Cuda(0), nullptr));
  }
  double err = 0, ref = 0, dot = 0, g8 = 0;
  for (size_t i = 0; i < grads[0].size(); ++i) {
    const double a = grads[0][i], b = grads[1][i];
    err += (b - a) * (b - a), ref += a * a, dot += a * b, g8 += b * b;
  }
  std::printf("FP8 LM head vs bf16 head, one step on the same inputs: loss %.6f vs %.6f "
              "(relative error %.2e); gradient relative L2 error %.3e, cosine %.6f, norm ratio "
              "%.4f (%zu parameters)\n",
              loss[1], loss[0], std::fabs(loss[1] - loss[0]) / std::fabs(loss[0]),
              std::sqrt(err / ref), dot / std::sqrt(ref * g8), std::sqrt(g8 / ref),
              grads[0].size());
  return Status::Ok();
}

struct RunResult {
  double step_ms = 0, act_gib = 0, state_gib = 0;
  double overlap_ms = 0;          // the best overlapped mode's step
  std::string overlap_mode;
  double gemm_floor_ms = 0;       // the step's GEMM FLOPs at the sustained cuBLAS rate
  double peer_gemm_floor_ms = 0;  // the same with the LM head on every row, as the peer does
};

// `lm_head_fp8`: the FP8 LM head, timed without the optimizer-overlap comparison.
Status Run(const DrafterShape& shape, int steps, bool stages, bool lm_head_fp8,
           RunResult* out) {
  kernels::DevicePools pools;  // outlives every tensor and the trainer below
  ASSIGN_OR_RETURN(kernels::CachingPool * pool, pools.Pool(0));
  const models::DFlashConfig& config = shape.config;
  ASSIGN_OR_RETURN(Inputs in, MakeInputs(*pool, shape));
  std::optional<kernels::Fp8LmHeadWeights> q;
  if (lm_head_fp8) {
    ASSIGN_OR_RETURN(q, kernels::Fp8LmHeadWeights::Quantize(in.lm_head, *pool, nullptr));
  }
  const models::PackedBatchMeta meta = in.meta();
  const std::vector<kernels::TensorView>& ctx_views = in.ctx_views;
  RETURN_IF_ERROR(kernels::SynchronizeStream(kernels::Device::Cuda(0), nullptr));
  const int64_t inputs_bytes = pool->stats().in_use_bytes;

  ASSIGN_OR_RETURN(auto trainer, MakeTrainer(*pool, shape, lm_head_fp8));
  const models::DFlashParams& p = trainer->drafter().params();
  const int64_t state_bytes = p.master.nbytes() + p.compute.nbytes() + p.grads.nbytes() +
                              p.adam_m.nbytes() + p.adam_v.nbytes();
  models::DFlashTargetHead head{in.embedding, in.lm_head};
  if (q) head.lm_head_fp8 = &q->head();
  RETURN_IF_ERROR(trainer->Step(head, meta, ctx_views));  // warm-up: plans, cuBLASLt heuristics
  RETURN_IF_ERROR(trainer->Step(head, meta, ctx_views));
  RETURN_IF_ERROR(kernels::SynchronizeStream(kernels::Device::Cuda(0), nullptr));
  pool->ResetHighWater();
  Result<std::unique_ptr<PowerSampler>> power = PowerSampler::Start(0);
  ASSIGN_OR_RETURN(out->step_ms,
                   TimeMs(nullptr, steps, 0, [&] { return trainer->Step(head, meta, ctx_views); }));
  std::printf("tandem steps: %s\n",
              power.ok() ? (*power)->Stop().ToString().c_str() : power.status().ToString().c_str());
  RETURN_IF_ERROR(PrintSelector(trainer->drafter()));
  const int64_t peak = pool->stats().high_water_in_use;
  out->act_gib = static_cast<double>(peak - inputs_bytes - state_bytes) / (1 << 30);
  out->state_gib = static_cast<double>(state_bytes) / (1 << 30);

  // The GEMM floor: this step's GEMM FLOPs at the cuBLAS 8192^3 rate sustained for ~2 s (at
  // the power limit, like the steps above), next to the rate of a short burst.
  const int64_t rows = trainer->drafter().rows();  // anchors x block size
  const double flops = StepGemmFlops(config, rows, kTokens, trainer->drafter().loss_rows());
  ASSIGN_OR_RETURN(const double burst, GemmCeilingTflops(nullptr));
  power = PowerSampler::Start(0);
  ASSIGN_OR_RETURN(const double sustained, GemmCeilingTflops(nullptr, 1500));
  const std::string sustained_power =
      power.ok() ? (*power)->Stop().ToString() : power.status().ToString();
  out->gemm_floor_ms = flops / sustained / 1e9;
  out->peer_gemm_floor_ms = StepGemmFlops(config, rows, kTokens, rows) / sustained / 1e9;
  std::printf("GEMM work per step: %.2f TFLOP (%lld loss rows); cuBLAS 8192^3: %.0f TFLOP/s in a "
              "burst, %.0f TFLOP/s sustained (%s)\n",
              flops / 1e12, static_cast<long long>(trainer->drafter().loss_rows()), burst,
              sustained, sustained_power.c_str());
  std::printf("GEMM floor at the sustained rate: %.1f ms; tandem spends %.1f ms a step on the "
              "rest\n", out->gemm_floor_ms, out->step_ms - out->gemm_floor_ms);

  if (lm_head_fp8) return Status::Ok();
  // The optimizer overlapped with the next forward, against the serial order in
  // the same run, interleaved.
  int least = 0, greatest = 0;
  if (cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess) greatest = least = 0;
  const OptimizerMode modes[] = {{"serial optimizer", false, 0},
                                 {"overlapped, stream priority 0", true, 0},
                                 {"overlapped, most urgent stream", true, greatest}};
  std::printf("optimizer overlap, %d steps per run, modes interleaved:\n", steps);
  ASSIGN_OR_RETURN(std::vector<double> mode_ms,
                   TimeModes(*trainer, head, meta, ctx_views, steps, modes, 2));
  for (size_t m = 0; m < mode_ms.size(); ++m) {
    std::printf("  %-36s %8.2f ms = %.3fx the GEMM floor (bar <= 1.2x: %s)\n", modes[m].name,
                mode_ms[m], mode_ms[m] / out->gemm_floor_ms,
                mode_ms[m] <= 1.2 * out->gemm_floor_ms ? "met" : "missed");
    if (modes[m].overlap && (out->overlap_ms == 0 || mode_ms[m] < out->overlap_ms)) {
      out->overlap_ms = mode_ms[m];
      out->overlap_mode = modes[m].name;
    }
  }
  std::printf("  overlap gain: %.2f ms a step (%.1f%%) against the serial optimizer in the same "
              "rounds\n", mode_ms[0] - out->overlap_ms,
              100.0 * (mode_ms[0] - out->overlap_ms) / mode_ms[0]);
  std::printf("tandem: workspace %.2f GiB (activations + backward scratch), params %lld\n",
              static_cast<double>(trainer->drafter().workspace_bytes()) / (1 << 30),
              static_cast<long long>(p.layout.total));
  if (stages) RETURN_IF_ERROR(PrintStages(*trainer, head, meta, ctx_views, 3));
  return Status::Ok();
}

int RunDrafter(const std::vector<std::string>& args) {
  int steps = 10;
  bool stages = false, peer_wanted = true, fp8 = false, dflash2 = false;
  DrafterShape shape = Shape8b();
  for (const std::string& a : args) {
    if (a == "--shape=8b" || a == "--shape=27b") {
      shape = a == "--shape=27b" ? Shape27b() : Shape8b();
    } else if (a == "stages") {
      stages = true;
    } else if (a == "--no-peer") {
      peer_wanted = false;
    } else if (a == "--type=dflash" || a == "--type=dflash2") {
      dflash2 = a == "--type=dflash2";
    } else if (a == "--lm-head=fp8" || a == "--lm-head=bf16") {
      fp8 = a == "--lm-head=fp8";
    } else if (std::atoi(a.c_str()) > 0) {
      steps = std::atoi(a.c_str());
    } else {
      std::printf("drafter: unknown argument \"%s\" (usage: [steps] [stages] [--no-peer] "
                  "[--lm-head=fp8] [--shape=8b|27b] [--type=dflash|dflash2])\n", a.c_str());
      return 1;
    }
  }
  if (dflash2) MakeDFlash2Config(&shape.config);
  if (kernels::CudaDeviceCount() == 0) {
    std::printf("drafter: no CUDA device\n");
    return 1;
  }
  RunResult r, r8;
  Status s = Status::Ok();
  if (fp8) {
    s = HeadFidelity(shape);
    if (s.ok()) s = Run(shape, steps, false, true, &r8);
    if (s.ok()) std::printf("tandem with the FP8 LM head: %.2f ms a step\n", r8.step_ms);
  }
  std::printf("%s drafter shape %s: hidden %lld, %lld/%lld heads of %lld, MLP %lld, vocab %lld\n",
              dflash2 ? "DFlash2" : "DFlash", shape.name.c_str(),
              static_cast<long long>(shape.hidden()),
              static_cast<long long>(shape.config.layers.num_attention_heads),
              static_cast<long long>(shape.config.layers.num_key_value_heads),
              static_cast<long long>(shape.config.layers.head_dim),
              static_cast<long long>(shape.config.layers.intermediate_size),
              static_cast<long long>(shape.vocab()));
  if (s.ok()) s = Run(shape, steps, stages, false, &r);
  if (!s.ok()) {
    std::printf("error: %s\n", s.ToString().c_str());
    return 1;
  }
  const nlohmann::json peer =
      peer_wanted ? RunPeer(TANDEM_DRAFTER_PEER,
                            fmt::format("--steps {} --shape {} --type {}", steps, shape.name,
                                        dflash2 ? "dflash2" : "dflash"),
                            "torch")
                  : nlohmann::json();
  auto num = [&](const char* k) { return PeerNumber(peer, k); };
  const double pms = num("step_ms"), pact = num("act_gib");
  std::printf("%-10s %10s %12s %14s %14s\n", "impl", "step ms", "tokens/s", "act mem GiB",
              "state GiB");
  const double ms = r.step_ms, act = r.act_gib;
  std::printf("%-10s %10.2f %12.0f %14.2f %14.2f\n", "tandem", ms, kTokens / ms * 1e3, act,
              r.state_gib);
  if (fp8)
    std::printf("%-10s %10.2f %12.0f %14.2f %14.2f\n", "tandem-f8h", r8.step_ms,
                kTokens / r8.step_ms * 1e3, r8.act_gib, r8.state_gib);
  if (r.overlap_ms > 0)
    std::printf("%-10s %10.2f %12.0f   (%s)\n", "tandem+ov", r.overlap_ms,
                kTokens / r.overlap_ms * 1e3, r.overlap_mode.c_str());
  if (pms > 0)
    std::printf("%-10s %10.2f %12.0f %14.2f %14.2f\n", "torch", pms, kTokens / pms * 1e3, pact,
                num("state_gib"));
  if (pms > 0)
    std::printf("ratios: speed %.2fx (bar >= 1.2x), activation memory %.2fx (bar <= 0.7x)\n",
                pms / ms, pact > 0 ? act / pact : 0.0);
  if (pms > 0 && r.overlap_ms > 0)
    std::printf("ratios with the overlapped optimizer: speed %.2fx\n", pms / r.overlap_ms);
  if (pms > 0 && fp8)
    std::printf("FP8 LM head: %.2fx the peer (bar >= 1.25x: %s), %.2fx tandem's bf16 head\n",
                pms / r8.step_ms, pms / r8.step_ms >= 1.25 ? "met" : "MISSED",
                ms / r8.step_ms);
  if (pms > 0)
    std::printf("the peer (LM head on all %lld rows) has a GEMM floor of %.1f ms and spends %.1f "
                "ms a step beyond it; a step 1.2x faster than the peer (%.1f ms) would leave "
                "tandem %.1f ms for everything but GEMMs\n",
                static_cast<long long>(kTokens), r.peer_gemm_floor_ms, pms - r.peer_gemm_floor_ms,
                pms / 1.2, pms / 1.2 - r.gemm_floor_ms);
  return 0;
}

}  // namespace

TANDEM_BENCH("drafter", "step",
             "DFlash drafter training step, Qwen3-8B shape or --shape=27b (args: steps, default "
             "10; `stages` for a per-stage GPU time breakdown; --no-peer; --lm-head=fp8 adds the "
             "FP8 LM head; --type=dflash2 trains the DFlash2 drafter)",
             RunDrafter);

}  // namespace tandem::bench
