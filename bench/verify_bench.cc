// `tandem-bench verify`: one speculative verify step of the Qwen3 target with its KV cache
// (bar: 1.5x HF transformers): Qwen3-8B shape with random weights, a 2048-token prefix already
// in the cache, then 16 tokens appended with the 5 DFlash layers captured and the logits of all 16
// rows computed, then the cache cropped back to the prefix; next to HF transformers doing the
// same with its DynamicCache (bench/verify_peer.py: forward of the 16 tokens with
// past_key_values, output_hidden_states, then cache.crop), in the same run. Also one
// autoregressive step (1 token over the prefix, the block-size-1 loop's cost per token) on
// both sides, and tandem's verify with the f32 logits copied to the host and the stream
// synchronised, as models/speculative/DFlashDecoder does today, and with the greedy picks
// made on the device (kernels RowArgmax) and only they copied back. Bar: verify >= 1.5x HF.
// Then the whole decode loop (models/speculative DFlashDecoder::Generate: prefill, drafter
// forward, verify, accept, crop) with a random 5-layer 8B-shaped drafter, per generated token
// at block size 16 and at block size 1 (no drafter). Random weights accept ~no drafts, so the
// block-16 number is the loop's cost per verify step; divide by a trained drafter's tau. And
// the block-16 loop with 4 prompts per forward (DFlashBatchDecoder), per generated token.
// Args: --prefix=N (2048), --block=N (16), --iters=N (50), --no-peer, --peer=PATH,
// --loop-prompt=N (512), --loop-tokens=N (256; 0 skips the loop).
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/bench_util.h"
#include "bench/target_bench.h"

#ifdef TANDEM_HAVE_CUDA
#include "kernels/core/device_pools.h"
#include "kernels/core/stream.h"
#include "kernels/elementwise/row_argmax.h"
#include "models/dflash/dflash_config.h"
#include "models/dflash/dflash_drafter.h"
#include "models/qwen3/qwen3_target.h"
#include "models/speculative/dflash_batch_decoder.h"
#include "models/speculative/dflash_decoder.h"
#endif

namespace tandem::bench {
namespace {

#ifdef TANDEM_HAVE_CUDA
using kernels::DType;
using kernels::Tensor;

struct VerifyArgs {
  int64_t prefix = 2048, block = 16;
  int iters = 50;
  int64_t loop_prompt = 512, loop_tokens = 256;
  bool peer = true;
  std::string peer_path = TANDEM_VERIFY_PEER;
};

struct VerifyTimes {
  double prefill_ms = 0, verify_ms = 0, verify_host_ms = 0, verify_argmax_ms = 0, step1_ms = 0;
};

std::vector<int32_t> Ids(int64_t n, uint32_t salt, int64_t vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    ids[i] = static_cast<int32_t>(((i + salt) * 2654435761u) % static_cast<uint32_t>(vocab));
  return ids;
}

// Times prefill, verify (with and without the host copy of the logits) and a 1-token step.
Result<VerifyTimes> TimeTandem(const models::TransformerConfig& cfg, const std::vector<int>& layers,
                               const VerifyArgs& a, const kernels::CudaStream& stream) {
  kernels::DevicePools pools;  // this run's own: everything goes back to CUDA at return
  ASSIGN_OR_RETURN(kernels::CachingPool * pool, pools.Pool(0));
  ASSIGN_OR_RETURN(std::unique_ptr<models::Qwen3Target> target,
                   models::Qwen3Target::Random(cfg, *pool, 1,
                                               {.max_tokens = a.prefix, .stream = stream.get()}));
  ASSIGN_OR_RETURN(models::Qwen3KvCache cache,
                   models::Qwen3KvCache::Create(cfg, a.prefix + a.block, *pool, stream.get()));
  std::vector<Tensor> bufs;
  for (size_t i = 0; i < layers.size(); ++i) {
    ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(*pool, DType::kBF16, {a.prefix, cfg.hidden_size},
                                             stream.get()));
    bufs.push_back(std::move(t));
  }
  auto captures = [&](int64_t rows) {
    std::vector<models::LayerCapture> caps;
    for (size_t i = 0; i < layers.size(); ++i)
      caps.push_back({layers[i], bufs[i].view().Narrow(0, 0, rows)});
    return caps;
  };
  ASSIGN_OR_RETURN(Tensor logits, Tensor::Empty(*pool, DType::kF32, {a.block, cfg.vocab_size},
                                                stream.get()));
  ASSIGN_OR_RETURN(Tensor picks, Tensor::Empty(*pool, DType::kI32, {a.block}, stream.get()));
  std::vector<float> host(static_cast<size_t>(a.block * cfg.vocab_size));
  std::vector<int32_t> host_picks(static_cast<size_t>(a.block));
  const std::vector<int32_t> prefix = Ids(a.prefix, 0, cfg.vocab_size);
  const std::vector<int32_t> block = Ids(a.block, 7, cfg.vocab_size);
  const auto prefix_caps = captures(a.prefix), block_caps = captures(a.block),
             step_caps = captures(1);
  VerifyTimes t;
  ASSIGN_OR_RETURN(t.prefill_ms, TimeMs(stream.get(), 3, 1, [&]() -> Status {
                     RETURN_IF_ERROR(cache.Crop(0));
                     return target->Extend(cache, prefix, prefix_caps);
                   }));
  enum class Out { kDevice, kHostLogits, kHostArgmax };
  auto verify = [&](int64_t n, Out to) -> Status {
    const kernels::TensorView l = logits.view().Narrow(0, 0, n);
    RETURN_IF_ERROR(target->Extend(cache, std::span(block).first(n),
                                   n == 1 ? step_caps : block_caps, l));
    RETURN_IF_ERROR(cache.Crop(a.prefix));
    if (to == Out::kDevice) return Status::Ok();
    if (to == Out::kHostLogits) {
      RETURN_IF_ERROR(kernels::CopyToHost(host.data(), l, stream.get()));
    } else {
      const kernels::TensorView p = picks.view().Narrow(0, 0, n);
      RETURN_IF_ERROR(kernels::RowArgmax(p, l, stream.get()));
      RETURN_IF_ERROR(kernels::CopyToHost(host_picks.data(), p, stream.get()));
    }
    return stream.Synchronize();
  };
  ASSIGN_OR_RETURN(t.verify_ms,
                   TimeMs(stream.get(), a.iters, 3, [&] { return verify(a.block, Out::kDevice); }));
  ASSIGN_OR_RETURN(t.verify_host_ms, TimeMs(stream.get(), a.iters, 3,
                                            [&] { return verify(a.block, Out::kHostLogits); }));
  ASSIGN_OR_RETURN(t.verify_argmax_ms, TimeMs(stream.get(), a.iters, 3,
                                              [&] { return verify(a.block, Out::kHostArgmax); }));
  ASSIGN_OR_RETURN(t.step1_ms,
                   TimeMs(stream.get(), a.iters, 3, [&] { return verify(1, Out::kDevice); }));
  RETURN_IF_ERROR(stream.Synchronize());
  return t;
}

struct LoopTimes {
  double prefill_ms = 0;        // Generate with one new token: prefill + first pick
  double ms_per_token[2] = {};  // decode only (prefill run subtracted): block 16, block 1
  double tau = 0;               // generated tokens per verify step at block 16
  double batch_ms_per_token = 0;  // block 16, kLoopBatch prompts per forward (wall / tokens)
};

constexpr int64_t kLoopBatch = 4;

// The whole loop, timed by wall clock around DFlashDecoder::Generate (it syncs per step).
Result<LoopTimes> TimeLoop(const models::TransformerConfig& cfg, const VerifyArgs& a,
                           const kernels::CudaStream& stream) {
  const kernels::Device dev = kernels::Device::Cuda(0);
  const int64_t block = 16, context = a.loop_prompt + a.loop_tokens + block;
  kernels::DevicePools pools;  // this run's own: everything goes back to CUDA at return
  ASSIGN_OR_RETURN(kernels::CachingPool * pool, pools.Pool(0));
  ASSIGN_OR_RETURN(std::unique_ptr<models::Qwen3Target> target,
                   models::Qwen3Target::Random(
                       cfg, *pool, 1, {.max_tokens = a.loop_prompt, .stream = stream.get()}));
  ASSIGN_OR_RETURN(std::unique_ptr<models::DFlashDrafter> drafter,
                   models::DFlashDrafter::Create(
                       Qwen3_8bDrafterConfig(5),
                       {.max_tokens = kLoopBatch * context,
                        .num_blocks = models::DrafterBlocksForBatch(kLoopBatch, dev)},
                       *pool, stream.get()));
  RETURN_IF_ERROR(drafter->params().InitFromScratch(2, stream.get()));
  const std::vector<int32_t> prompt = Ids(a.loop_prompt, 3, cfg.vocab_size);
  LoopTimes t;
  for (int b = 0; b < 2; ++b) {
    const int64_t bs = b == 0 ? block : 1;
    ASSIGN_OR_RETURN(std::unique_ptr<models::DFlashDecoder> decoder,
                     models::DFlashDecoder::Create(target.get(), b == 0 ? drafter.get() : nullptr,
                                                   context, stream.get()));
    models::SpecDecodeOptions o;
    o.block_size = bs;
    o.max_new_tokens = 1;
    RETURN_IF_ERROR(decoder->Generate(prompt, o).status());  // warm-up
    ASSIGN_OR_RETURN(models::SpecDecodeResult first, decoder->Generate(prompt, o));
    o.max_new_tokens = a.loop_tokens;
    ASSIGN_OR_RETURN(models::SpecDecodeResult all, decoder->Generate(prompt, o));
    if (b == 0) {
      t.prefill_ms = first.seconds * 1e3;
      t.tau = double(all.tokens.size()) / double(std::max<size_t>(1, all.accept_lengths.size()));
    }
    t.ms_per_token[b] =
        (all.seconds - first.seconds) * 1e3 / double(std::max<size_t>(2, all.tokens.size()) - 1);
  }
  // kLoopBatch prompts per forward: wall time of the batch's decode (its prefill-only run
  // subtracted) over all its generated tokens.
  ASSIGN_OR_RETURN(std::unique_ptr<models::DFlashBatchDecoder> batched,
                   models::DFlashBatchDecoder::Create(target.get(), drafter.get(), kLoopBatch,
                                                      context, stream.get()));
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t i = 0; i < kLoopBatch; ++i)
    prompts.push_back(Ids(a.loop_prompt, 3 + uint32_t(i), cfg.vocab_size));
  models::SpecDecodeOptions o;
  o.block_size = block;
  double wall[2] = {};
  int64_t tokens[2] = {};
  for (int r = 0; r < 2; ++r) {
    o.max_new_tokens = r == 0 ? 1 : a.loop_tokens;
    const auto t0 = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(std::vector<models::SpecDecodeResult> out, batched->GenerateAll(prompts, o));
    wall[r] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    for (const models::SpecDecodeResult& x : out) tokens[r] += int64_t(x.tokens.size());
  }
  t.batch_ms_per_token = (wall[1] - wall[0]) / double(std::max<int64_t>(1, tokens[1] - tokens[0]));
  return t;
}

Result<VerifyArgs> ParseVerifyArgs(const std::vector<std::string>& args) {
  VerifyArgs a;
  for (const std::string& s : args) {
    auto num = [&](size_t skip) -> Result<int64_t> {
      try {
        return std::stoll(s.substr(skip));
      } catch (const std::exception&) {
        return InvalidArgumentError("verify bench: {} is not a number", s);
      }
    };
    if (s == "--no-peer") a.peer = false;
    else if (s.rfind("--peer=", 0) == 0) a.peer_path = s.substr(7);
    else if (s.rfind("--prefix=", 0) == 0) { ASSIGN_OR_RETURN(a.prefix, num(9)); }
    else if (s.rfind("--block=", 0) == 0) { ASSIGN_OR_RETURN(a.block, num(8)); }
    else if (s.rfind("--loop-prompt=", 0) == 0) { ASSIGN_OR_RETURN(a.loop_prompt, num(14)); }
    else if (s.rfind("--loop-tokens=", 0) == 0) { ASSIGN_OR_RETURN(a.loop_tokens, num(14)); }
    else if (s.rfind("--iters=", 0) == 0) {
      ASSIGN_OR_RETURN(int64_t n, num(8));
      a.iters = static_cast<int>(n);
    } else return InvalidArgumentError("verify bench: unknown argument {}", s);
  }
  if (a.loop_prompt < 1 || a.loop_tokens < 0)
    return InvalidArgumentError("verify bench: need --loop-prompt >= 1 and --loop-tokens >= 0");
  if (a.prefix < 1 || a.block < 1 || a.block > a.prefix || a.iters < 1)
    return InvalidArgumentError(
        "verify bench: need prefix >= block >= 1 and iters >= 1 (prefix {}, block {}, iters {})",
        a.prefix, a.block, a.iters);
  return a;
}

int RunVerify(const std::vector<std::string>& args) {
  const Result<VerifyArgs> a = ParseVerifyArgs(args);
  if (!a.ok()) {
    std::fprintf(stderr, "%s\n", a.status().message().c_str());
    return 2;
  }
  if (kernels::CudaDeviceCount() == 0) {
    std::printf("verify: skipped (no CUDA device visible)\n");
    return 0;
  }
  const models::TransformerConfig cfg = Qwen3_8bConfig();
  std::vector<int> layers;
  std::string layer_arg;
  for (int64_t l : models::DFlashTargetLayerIds(cfg.num_hidden_layers, 5)) {
    layers.push_back(static_cast<int>(l));
    layer_arg += (layer_arg.empty() ? "" : ",") + std::to_string(l);
  }
  // The peer runs first, in its own process, so the two never share the GPU's memory.
  nlohmann::json pj;
  if (a->peer)
    pj = RunPeer(a->peer_path,
                 "--prefix=" + std::to_string(a->prefix) + " --block=" + std::to_string(a->block) +
                     " --layers=" + layer_arg + " --iters=" + std::to_string(a->iters),
                 "torch, transformers");
  auto stream = kernels::CudaStream::Create(0);
  if (!stream.ok()) {
    std::fprintf(stderr, "verify bench: %s\n", stream.status().ToString().c_str());
    return 1;
  }
  const Result<VerifyTimes> t = TimeTandem(cfg, layers, *a, *stream);
  if (!t.ok()) {
    std::fprintf(stderr, "verify bench: %s\n", t.status().ToString().c_str());
    return 1;
  }
  std::printf("Qwen3-8B shape, random weights; prefix %ld tokens, block %ld, captures %s, "
              "logits f32 [%ld, %ld]\n", a->prefix, a->block, layer_arg.c_str(), a->block,
              cfg.vocab_size);
  std::printf("%-34s %12s %12s %8s\n", "", "tandem ms", "HF ms", "ratio");
  auto row = [&](const char* name, double ours, const char* key) {
    const double peer = PeerNumber(pj, key);
    if (peer > 0)
      std::printf("%-34s %12.3f %12.3f %7.2fx\n", name, ours, peer, peer / ours);
    else
      std::printf("%-34s %12.3f %12s %8s\n", name, ours, "-", "-");
  };
  row("prefill", t->prefill_ms, "prefill_ms");
  row("verify (block over prefix)", t->verify_ms, "verify_ms");
  row("verify + logits to host + sync", t->verify_host_ms, "");
  row("verify + device argmax to host", t->verify_argmax_ms, "");
  row("1-token step (block size 1)", t->step1_ms, "step1_ms");
  const double hf = PeerNumber(pj, "verify_ms");
  if (hf > 0)
    std::printf("bar verify >= 1.5x HF transformers: %s (%.2fx)\n",
                hf / t->verify_ms >= 1.5 ? "met" : "MISSED", hf / t->verify_ms);
  std::printf("verify / 1-token step: %.2f (a block of %ld costs that many single steps)\n",
              t->verify_ms / t->step1_ms, a->block);
  if (a->loop_tokens == 0) return 0;
  const Result<LoopTimes> loop = TimeLoop(cfg, *a, *stream);
  if (!loop.ok()) {
    std::fprintf(stderr, "verify bench: decode loop: %s\n", loop.status().ToString().c_str());
    return 1;
  }
  std::printf("whole loop (DFlashDecoder::Generate), prompt %ld, %ld new tokens, random weights:\n"
              "  prefill + first token %.3f ms\n"
              "  block size 16: %.3f ms per generated token (tau %.3f; %.3f ms per verify step)\n"
              "  block size 1:  %.3f ms per generated token\n"
              "  block size 16, %ld prompts per forward: %.3f ms per generated token\n"
              "  a trained drafter at tau T makes block 16 cost %.3f / T ms per token\n",
              a->loop_prompt, a->loop_tokens, loop->prefill_ms, loop->ms_per_token[0], loop->tau,
              loop->ms_per_token[0] * loop->tau, loop->ms_per_token[1], kLoopBatch,
              loop->batch_ms_per_token, loop->ms_per_token[0] * loop->tau);
  return 0;
}
#else
int RunVerify(const std::vector<std::string>&) {
  std::printf("verify: skipped (built without CUDA)\n");
  return 0;
}
#endif

}  // namespace

TANDEM_BENCH("verify", "verify", "Qwen3-8B verify step (16 tokens over 2048 cached) vs HF KV cache",
             RunVerify);

}  // namespace tandem::bench
