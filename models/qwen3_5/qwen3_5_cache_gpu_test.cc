// GPU test of hybrid decoding (label gpu; SKIPPED without a device): Qwen35Target::Extend on
// CUDA against the CPU reference (qwen3_5_cache_test.cc checks that one bitwise against a
// fresh prefill), on the committed tiny Qwen3.5 (6 Gated DeltaNet + 2 gated-attention layers)
// loaded on both devices. The same sequence of calls runs on each: a prefill, a fully
// rejected block cropped away, a partly accepted block cropped in two steps (DeltaNet replay,
// conv rollback), verify-sized steps and a one-token step. After every Extend the logits and
// two captured layers (a DeltaNet layer and the last) of CUDA and CPU agree within twice
// transformers' bf16 error on the golden (this random model amplifies bf16 noise), and
// CUDA's logits after the rollbacks equal a fresh CUDA prefill of the accepted sequence. A
// state not carried between calls, or a rollback that missed a layer, moves them by O(1).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/core/device_pools.h"
#include "kernels/core/memory.h"
#include "kernels/testing/testing.h"
#include "models/qwen3_5/qwen3_5_cache.h"
#include "models/qwen3_5/qwen3_5_target.h"
#include "models/qwen3_5/qwen3_5_test_util.h"

namespace tandem::models {
namespace {

using kernels::bf16;
using kernels::Device;
using kernels::DType;
using kernels::Tensor;
using kernels::TensorView;
using kernels::testing::ToHost;

constexpr int kLinearLayer = 4;  // a Gated DeltaNet layer of the tiny config
constexpr int kLastLayer = 7;    // full attention

// One device's model and cache, and the outputs of its last Extend on the host.
struct Side {
  Device device;
  kernels::DevicePools pools;  // outlives the model and the cache
  std::unique_ptr<Qwen35Target> target;
  std::vector<float> logits, feat;  // [B, V] and [2, B, H] (the DeltaNet layer, the last)

  explicit Side(Device d) : device(d) {
    auto t = Qwen35Target::Load(testing::kDir, *pools.For(d).value(), {.max_tokens = 32});
    TANDEM_CHECK_OK(t.status());
    target = std::move(*t);
  }
  Qwen35Cache NewCache(int64_t capacity, int64_t max_block) {
    auto c = Qwen35Cache::Create(target->config(), capacity, max_block,
                                 *pools.For(device).value());
    TANDEM_CHECK_OK(c.status());
    return std::move(c).value();
  }
  void Extend(Qwen35Cache& cache, const std::vector<int32_t>& ids) {
    const Qwen35Config& c = target->config();
    const int64_t b = static_cast<int64_t>(ids.size()), h = c.hidden_size;
    kernels::Allocator& a = *pools.For(device).value();
    Tensor lg = Tensor::Empty(a, DType::kF32, {b, c.vocab_size}).value();
    Tensor lin = Tensor::Empty(a, DType::kBF16, {b, h}).value();
    Tensor last = Tensor::Empty(a, DType::kBF16, {b, h}).value();
    const HybridCapture caps[] = {{kLinearLayer, lin.view()}, {kLastLayer, last.view()}};
    const Status st = target->Extend(cache, ids, caps, lg.view());
    ASSERT_TRUE(st.ok()) << st.ToString();
    TANDEM_CHECK_OK(kernels::SynchronizeStream(device, nullptr));
    logits = ToHost<float>(lg.view());
    feat.clear();
    for (const Tensor* t : {&lin, &last})
      for (bf16 x : ToHost<bf16>(t->view())) feat.push_back(x.f());
  }
};

// ||a - b|| / ||b||.
double RelL2(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

std::vector<int32_t> Ids(int n, int seed, int64_t vocab) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back((seed * 131 + i * 37 + i * i * 7) % vocab);
  return v;
}

// How far transformers' bf16 forward is from the fp32 reference at `layer` on the golden
// batch (relative L2): this random tiny model amplifies bf16 noise layer by layer (0.8% at
// layer 0, 3.8% at layer 4, 6.8% at layer 7).
double HfBf16Error(int layer) {
  auto golden = SafetensorsReader::Open(testing::kGolden);
  TANDEM_CHECK_OK(golden.status());
  const std::string name = "hidden." + std::to_string(layer);
  return RelL2(testing::Read<float>(*golden, "bf16_hf." + name, DType::kF32),
               testing::Read<float>(*golden, name, DType::kF32));
}

TEST(Qwen35CacheGpuTest, CudaDecodingMatchesTheCpuReference) {
  Side gpu(Device::Cuda(0)), cpu(Device::Cpu());
  const int64_t v = gpu.target->config().vocab_size, h = gpu.target->config().hidden_size;
  // CUDA and CPU round at the same points but sum in other orders (and CUDA's chunked delta
  // rule orders its state updates differently): each is about as accurate as transformers'
  // bf16, so (the triangle inequality, as qwen3_5_target_gpu_test) they are within twice
  // its error of each other: 7.6% at the DeltaNet layer, 13.6% at the last layer and for
  // the logits after it. A state lost between calls, or a rollback that missed a layer,
  // is O(1) (the stale cache below: ~100%).
  const double tol_lin = 2 * HfBf16Error(kLinearLayer), tol_last = 2 * HfBf16Error(kLastLayer);
  const std::vector<int32_t> seq = Ids(19, 1, v), junk = Ids(6, 2, v);
  Qwen35Cache gc = gpu.NewCache(32, 8), cc = cpu.NewCache(32, 8);
  int step = 0;
  auto both = [&](const std::vector<int32_t>& ids, const char* what) {
    gpu.Extend(gc, ids);
    cpu.Extend(cc, ids);
    const size_t rows = ids.size() * h;
    auto part = [&](const std::vector<float>& f, int i) {
      return std::vector<float>(f.begin() + i * rows, f.begin() + (i + 1) * rows);
    };
    const double el = RelL2(gpu.logits, cpu.logits);
    const double lin = RelL2(part(gpu.feat, 0), part(cpu.feat, 0));
    const double last = RelL2(part(gpu.feat, 1), part(cpu.feat, 1));
    std::printf("step %d (%s, %zu tokens): rel L2 logits %.2e, layer %d %.2e, layer %d %.2e\n",
                step++, what, ids.size(), el, kLinearLayer, lin, kLastLayer, last);
    EXPECT_LT(el, tol_last) << what;
    EXPECT_LT(lin, tol_lin) << what;
    EXPECT_LT(last, tol_last) << what;
  };
  auto crop = [&](int64_t n) {
    ASSERT_TRUE(gc.Crop(n).ok());
    ASSERT_TRUE(cc.Crop(n).ok());
  };
  both(std::vector<int32_t>(seq.begin(), seq.begin() + 7), "prefill");
  both(junk, "rejected block");
  crop(7);
  both({seq[7], seq[8], seq[9], junk[0], junk[1]}, "3 of 5 accepted");
  crop(11);
  crop(10);
  both(std::vector<int32_t>(seq.begin() + 10, seq.begin() + 14), "verify step");
  both({seq[14]}, "one token");
  both(std::vector<int32_t>(seq.begin() + 15, seq.end()), "verify step");
  ASSERT_EQ(gc.length(), 19);

  // After the rollbacks, CUDA's last rows equal a fresh CUDA prefill of the accepted tokens.
  const std::vector<float> last = gpu.logits;
  Qwen35Cache fresh = gpu.NewCache(32, 8);
  gpu.Extend(fresh, seq);
  const std::vector<float> fresh_tail(gpu.logits.begin() + 15 * v, gpu.logits.end());
  const double e = RelL2(last, fresh_tail);
  std::printf("rolled-back CUDA cache vs fresh CUDA prefill: rel L2 logits %.2e\n", e);
  EXPECT_LT(e, 1e-3);  // 0 (bitwise) on the H200; a lost state is O(1)
  // Sensitivity: without the crops the junk stays in the state, far outside that noise.
  Qwen35Cache stale = gpu.NewCache(32, 8);
  gpu.Extend(stale, std::vector<int32_t>(seq.begin(), seq.begin() + 7));
  gpu.Extend(stale, junk);
  gpu.Extend(stale, std::vector<int32_t>(seq.begin() + 7, seq.end()));
  const std::vector<float> stale_tail(gpu.logits.end() - 4 * v, gpu.logits.end());
  const double e_stale = RelL2(stale_tail, fresh_tail);
  std::printf("stale CUDA cache (no crops) vs fresh prefill: rel L2 logits %.2e\n", e_stale);
  EXPECT_GT(e_stale, 2 * tol_last);
}

}  // namespace
}  // namespace tandem::models
