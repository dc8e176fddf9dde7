// `tandem-bench attention`: the target's packed causal attention forward (16384 tokens as
// 4 x 4096, 32/8 heads of 128; causal FLOPs counted once) and the DFlash block attention
// forward + backward (512 anchors x 16 over 8192 context tokens, window 2048, causal in
// block) in two layouts: random anchors over 2 documents (the bar's case) and the
// drafter's (sorted anchors, 4 documents of 2048), next to PyTorch (bench/attention_peer.py)
// when python3 imports torch.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench.h"
#include "bench/bench_util.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_testing.h"
#include "kernels/attention/dflash_path.h"
#endif

namespace tandem::bench {
namespace {

#ifdef TANDEM_HAVE_CUDA
using kernels::bf16;
using kernels::DType;
using kernels::Shape;
using kernels::TensorView;

struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) { cudaMalloc(&p, bytes); }
  template <typename T>
  explicit Dev(const std::vector<T>& h) : Dev(h.size() * sizeof(T)) {
    cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~Dev() { cudaFree(p); }
  TensorView View(DType t, Shape s) const { return TensorView(p, t, s, kernels::Device::Cuda(0)); }
};

// Mean milliseconds of fn over iters calls after 3 warm-ups; -1 (after printing the error)
// when a call fails.
double MeanMs(const std::function<Status()>& fn, int iters) {
  Result<double> ms = bench::TimeMs(nullptr, iters, 3, fn);
  if (ms.ok()) return *ms;
  std::printf("error: %s\n", ms.status().ToString().c_str());
  return -1.0;
}

using RowFn = std::function<void(const std::string&, double, double, double)>;
using PeerFn = std::function<double(const std::string&)>;

// DFlash block attention, 512 blocks of 16 over 8192 context tokens in documents of
// `clen`, window 2048, causal in block; `sorted` anchors as the drafter samples them. Rows:
// SIMT, the MMA forward (the warpgroup kernel where it applies) and each forward kernel,
// MMA fused backward (atomics), MMA split backward (delta scratch; what the drafter
// runs), next to flex_attention from the peer's JSON (keys flex_dflash_<layout>_*).
void RunDFlashLayout(const char* layout, int64_t clen, bool sorted, int iters, const RowFn& row,
                     const PeerFn& peer_ms) {
  using kernels::attention_testing::RandomBf16;
  const int64_t nb = 512, rows = nb * kernels::kDFlashBlockSize, ctx = 8192, hq = 32, hk = 8,
                d = 128;
  const int window = 2048;
  std::mt19937 rng(0);
  std::vector<int32_t> anchors(nb), starts(nb);
  for (int64_t b = 0; b < nb; ++b) anchors[b] = static_cast<int32_t>(rng() % ctx);
  if (sorted) std::sort(anchors.begin(), anchors.end());
  double keys = 0;  // visible (query, key) pairs per head, for the FLOP count
  for (int64_t b = 0; b < nb; ++b) {
    starts[b] = static_cast<int32_t>(anchors[b] / clen * clen);
    // Slot i sees min(context, W - 1 - i) context keys (the serving rule) and i + 1 own keys.
    for (int64_t i = 0; i < 16; ++i)
      keys += std::min<int64_t>(anchors[b] - starts[b], window - 1 - i) + i + 1;
  }
  Dev qb(RandomBf16(rows * hq * d, 4)), kb(RandomBf16(rows * hk * d, 5)),
      vb(RandomBf16(rows * hk * d, 6)), kc(RandomBf16(ctx * hk * d, 7)),
      vc(RandomBf16(ctx * hk * d, 8)), dout(RandomBf16(rows * hq * d, 9)), anc(anchors),
      st(starts);
  Dev ob(rows * hq * d * 2), lb(rows * hq * 4), dq(rows * hq * d * 2), dkb(rows * hk * d * 2),
      dvb(rows * hk * d * 2), dkc(ctx * hk * d * 4), dvc(ctx * hk * d * 4);
  const Shape bq{rows, hq, d}, bk{rows, hk, d}, ck{ctx, hk, d}, ls{rows, hq};
  const auto bf = DType::kBF16, f32 = DType::kF32;
  kernels::DFlashAttentionInputs in{qb.View(bf, bq), kb.View(bf, bk), vb.View(bf, bk),
                                    kc.View(bf, ck), vc.View(bf, ck), anc.View(DType::kI32, {nb}),
                                    st.View(DType::kI32, {nb})};
  const kernels::DFlashAttentionConfig cfg{window, true, 0.0f};
  using kernels::attention_internal::DFlashPath;
  auto fwd = [&](DFlashPath path) {
    return kernels::attention_internal::DFlashAttentionForwardPath(
        path, in, cfg, ob.View(bf, bq), lb.View(f32, ls), nullptr);
  };
  // split: with the delta scratch, i.e. the key-major context-gradient kernel (no atomics).
  Dev delta(rows * hq * 4);
  auto bwd = [&](DFlashPath path, bool split = false) {
    return kernels::attention_internal::DFlashAttentionBackwardPath(
        path, in, cfg, ob.View(bf, bq), lb.View(f32, ls), dout.View(bf, bq),
        {dq.View(bf, bq), dkb.View(bf, bk), dvb.View(bf, bk), dkc.View(f32, ck), dvc.View(f32, ck),
         split ? delta.View(f32, ls) : TensorView()},
        nullptr);
  };
  // fwd then bwd, stopping at the first error.
  auto fwd_bwd = [&](DFlashPath path, bool split = false) -> Status {
    RETURN_IF_ERROR(fwd(path));
    return bwd(path, split);
  };
  // SIMT kernels: the correct-first reference path; MMA: the tensor-core path kAuto picks.
  const double simt_fwd_ms = MeanMs([&] { return fwd(DFlashPath::kSimt); }, 3);
  const double simt_fwd_bwd_ms = MeanMs([&] { return fwd_bwd(DFlashPath::kSimt); }, 3);
  const double fwd_ms = MeanMs([&] { return fwd(DFlashPath::kMma); }, iters);
  // The mma.sync kernels alone (DFlashPath::kMmaSync): what the wgmma kernels kMma picks on a
  // Hopper are measured against.
  const double mma_sync_fwd_ms = MeanMs([&] { return fwd(DFlashPath::kMmaSync); }, iters);
  const double mma_sync_split_bwd_ms =
      MeanMs([&] { return bwd(DFlashPath::kMmaSync, true); }, iters);
  const double bwd_ms = MeanMs([&] { return bwd(DFlashPath::kMma); }, iters);
  const double fwd_bwd_ms = MeanMs([&] { return fwd_bwd(DFlashPath::kMma); }, iters);
  const double split_bwd_ms = MeanMs([&] { return bwd(DFlashPath::kMma, true); }, iters);
  const double split_fwd_bwd_ms = MeanMs([&] { return fwd_bwd(DFlashPath::kMma, true); }, iters);
  const double fwd_flops = 4.0 * d * hq * keys;  // QK^T and PV
  const double fwd_bwd_flops = fwd_flops * 3.5;  // + dV, dP, dQ, dK (and S recompute)

  const std::string p = fmt::format("flex_dflash_{}_", layout);
  const std::string tag = fmt::format("dflash {} ", layout);
  row(tag + "fwd (simt)", simt_fwd_ms, fwd_flops, peer_ms(p + "fwd_ms"));
  row(tag + "fwd+bwd (simt)", simt_fwd_bwd_ms, fwd_bwd_flops, peer_ms(p + "fwd_bwd_ms"));
  row(tag + "fwd (mma)", fwd_ms, fwd_flops, peer_ms(p + "fwd_ms"));
  row(tag + "fwd (mma.sync)", mma_sync_fwd_ms, fwd_flops, peer_ms(p + "fwd_ms"));
  row(tag + "bwd (mma, fused)", bwd_ms, fwd_bwd_flops - fwd_flops, 0.0);
  row(tag + "fwd+bwd (mma, fused)", fwd_bwd_ms, fwd_bwd_flops, peer_ms(p + "fwd_bwd_ms"));
  row(tag + "bwd (mma, split)", split_bwd_ms, fwd_bwd_flops - fwd_flops, 0.0);
  row(tag + "bwd (mma.sync, split)", mma_sync_split_bwd_ms, fwd_bwd_flops - fwd_flops, 0.0);
  row(tag + "fwd+bwd (mma, split)", split_fwd_bwd_ms, fwd_bwd_flops, peer_ms(p + "fwd_bwd_ms"));
  const double flex = peer_ms(p + "fwd_bwd_ms");
  std::printf("bar: dflash %s fwd+bwd >= 1.5x flex: %s (%.2fx)\n", layout,
              flex <= 0 ? "no peer" : flex / split_fwd_bwd_ms >= 1.5 ? "met" : "MISSED",
              flex > 0 ? flex / split_fwd_bwd_ms : 0.0);
}

int RunAttention(const std::vector<std::string>& args) {
  using kernels::attention_testing::RandomBf16;
  const int iters = 20;
  // --- target ---
  const int64_t docs = 4, len = 4096, t = docs * len, hq = 32, hk = 8, d = 128;
  Dev q(RandomBf16(t * hq * d, 1)), k(RandomBf16(t * hk * d, 2)), v(RandomBf16(t * hk * d, 3));
  Dev out(t * hq * d * 2), lse(t * hq * 4);
  std::vector<int32_t> cu_h;
  for (int64_t i = 0; i <= docs; ++i) cu_h.push_back(static_cast<int32_t>(i * len));
  Dev cu(cu_h);
  auto op = kernels::CausalVarlenAttention::Create(0);
  if (!op.ok()) {
    std::printf("error: %s\n", op.status().ToString().c_str());
    return 1;
  }
  const Shape qs{t, hq, d}, ks{t, hk, d};
  const double target_ms = MeanMs([&] {
    return op.value()->Forward(q.View(DType::kBF16, qs), k.View(DType::kBF16, ks),
                               v.View(DType::kBF16, ks), cu.View(DType::kI32, {docs + 1}),
                               static_cast<int>(len), 0.0f, out.View(DType::kBF16, qs),
                               TensorView(), nullptr);
  }, iters);
  const double target_flops = 4.0 * d * hq * docs * len * (len + 1) / 2;
  const double target_tflops = target_flops / target_ms / 1e9;

  const nlohmann::json peer = RunPeer(TANDEM_ATTENTION_PEER, "", "torch");
  auto peer_ms = [&](const std::string& key) { return PeerNumber(peer, key.c_str()); };
  std::printf("%-40s %10s %10s %12s %10s\n", "case", "ms", "TFLOP/s", "torch ms", "speedup");
  auto row = [&](const std::string& name, double ms, double flops, double torch_ms) {
    std::printf("%-40s %10.3f %10.1f %12.3f %10s\n", name.c_str(), ms, flops / ms / 1e9,
                torch_ms, torch_ms > 0 ? fmt::format("{:.2f}x", torch_ms / ms).c_str() : "-");
  };
  row(fmt::format("target fwd ({})", op.value()->last_backend()), target_ms, target_flops,
      peer_ms("sdpa_target_ms"));
  std::printf("bar: target >= 500 TFLOP/s: %s (%.1f)\n", target_tflops >= 500 ? "met" : "MISSED",
              target_tflops);
  // The bar's first case (random anchors over 2 documents of 4096) and the drafter's layout
  // (anchors sorted as models/dflash/dflash_anchors.cc makes them, 4 documents of 2048).
  RunDFlashLayout("random", 4096, false, iters, row, peer_ms);
  RunDFlashLayout("drafter", 2048, true, iters, row, peer_ms);
  if (!peer.empty()) std::printf("peer json: %s\n", peer.dump().c_str());
  return 0;
}
#else
int RunAttention(const std::vector<std::string>&) {
  std::printf("attention: built without CUDA; nothing to measure\n");
  return 0;
}
#endif

TANDEM_BENCH("attention", "attention", "packed causal + DFlash block attention vs PyTorch",
             RunAttention);

}  // namespace
}  // namespace tandem::bench
