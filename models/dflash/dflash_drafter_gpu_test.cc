// DFlash drafter on CUDA against the CPU path: one forward + backward + AdamW step from
// identical parameters and inputs; loss, every gradient tensor and the weight update agree
// within bf16-level tolerances. Also: a step allocates nothing from the device pool.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/core/device_pools.h"
#include "kernels/core/memory.h"
#include "models/dflash/dflash_drafter.h"
#include "models/dflash/dflash_gpu_test_util.h"
#include "models/dflash/dflash_test_util.h"

namespace tandem::models {
namespace {

using kernels::bf16;
using kernels::Device;
using kernels::DType;
using kernels::Shape;
using kernels::Tensor;
using kernels::TensorView;

using testing::Host;
using testing::RelL2;

// The tiny drafter with the smallest head_dim the DFlash attention CUDA kernels take (64).
DFlashConfig CudaTinyConfig() {
  DFlashConfig config = testing::TinyDFlashConfig();
  config.layers.hidden_size = 64;
  config.layers.head_dim = 64;
  config.layers.rotary_dim = 64;
  config.layers.intermediate_size = 96;
  config.layers.vocab_size = 256;
  config.mask_token_id = 255;
  return config;
}

// The tiny batch of both tests, its block plan, and random embedding / LM head / context.
struct Inputs {
  DFlashConfig config = CudaTinyConfig();
  DFlashBlockPlan plan;
  std::vector<bf16> emb, lm;
  std::vector<std::vector<bf16>> ctx;
};

Inputs MakeInputs() {
  Inputs in;
  const int64_t v = in.config.layers.vocab_size, h = in.config.layers.hidden_size;
  testing::HostBatch batch = testing::MakeBatch({70, 33, 57}, v, 3);
  auto anchors = SampleAnchors(batch.meta(), 12, 1, 0);
  EXPECT_TRUE(anchors.ok());
  auto plan = BuildBlockPlan(batch.meta(), *anchors, 12, 16, 255, 7.0);
  EXPECT_TRUE(plan.ok());
  in.plan = std::move(*plan);
  const int64_t t = in.plan.tokens;
  in.emb = testing::RandomBf16(v * h, 1.0f, 1);
  in.lm = testing::RandomBf16(v * h, 0.3f, 2);
  in.ctx = {testing::RandomBf16(t * h, 1.0f, 3), testing::RandomBf16(t * h, 1.0f, 4)};
  return in;
}

// A drafter on one device with randomized parameters, the plan set, and its own copies of
// the inputs.
struct Side {
  std::unique_ptr<kernels::DevicePools> pools;  // first: outlives everything below
  std::unique_ptr<DFlashDrafter> drafter;
  std::vector<Tensor> owned;  // the device copies
  DFlashTargetHead head;
  std::vector<TensorView> ctx;
};

void MakeSide(const Inputs& in, Device dev, int64_t max_tokens, Side* side) {
  const int64_t v = in.config.layers.vocab_size, h = in.config.layers.hidden_size;
  side->pools = std::make_unique<kernels::DevicePools>();
  kernels::Allocator* alloc = side->pools->For(dev).value();
  auto d = DFlashDrafter::Create(in.config, {max_tokens, 12, 64}, *alloc, nullptr);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  side->drafter = std::move(*d);
  auto upload = [&](const std::vector<bf16>& host, Shape shape) {
    return testing::Upload(*alloc, host, shape, &side->owned);
  };
  side->head = {upload(in.emb, Shape{v, h}), upload(in.lm, Shape{v, h})};
  for (const std::vector<bf16>& c : in.ctx)
    side->ctx.push_back(upload(c, Shape{in.plan.tokens, h}));
  testing::RandomizeParams(side->drafter->params(), 8);
  ASSERT_TRUE(side->drafter->SetPlan(in.plan).ok());
}

TEST(DFlashDrafterCudaTest, StepMatchesCpu) {
  const Inputs in = MakeInputs();
  Side cpu, gpu;
  MakeSide(in, Device::Cpu(), in.plan.tokens + 5, &cpu);
  MakeSide(in, Device::Cuda(0), in.plan.tokens + 5, &gpu);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  std::vector<float> before = Host<float>(gpu.drafter->params().master);
  kernels::AdamWConfig cfg;
  cfg.lr = 1e-3f;
  kernels::CachingPool* pool = gpu.pools->Pool(0).value();
  for (Side* side : {&cpu, &gpu}) {
    if (side == &gpu) {
      ASSERT_TRUE(kernels::SynchronizeStream(Device::Cuda(0), nullptr).ok());
    }
    const int64_t allocs = pool->stats().num_allocs;
    Status fb = side->drafter->ForwardBackward(side->head, side->ctx, 0.05f, 7, 3, true);
    ASSERT_TRUE(fb.ok()) << fb.ToString();
    Status step = side->drafter->OptimizerStep(cfg, 1.0f);
    ASSERT_TRUE(step.ok()) << step.ToString();
    if (side == &gpu) {
      EXPECT_EQ(pool->stats().num_allocs, allocs) << "a step allocated";
    }
  }
  const float lc = Host<float>(cpu.drafter->loss())[0], lg = Host<float>(gpu.drafter->loss())[0];
  // Both are bf16-activation paths; they differ in accumulation order and in where fp32
  // values round to bf16 (cuBLASLt vs the blocked CPU GEMM, fused CE chunks), i.e. by a few
  // bf16 ulps per op: 1% of the loss (the same bound as against float64).
  EXPECT_NEAR(lg, lc, 1e-2 * std::abs(lc));
  std::vector<float> gc = Host<float>(cpu.drafter->params().grads),
                     gg = Host<float>(gpu.drafter->params().grads);
  for (const DFlashParamSpec& s : cpu.drafter->params().layout.specs)
    // 5% relative L2 per tensor: the bound both paths meet against float64 (FD test).
    EXPECT_LT(RelL2(&gg[s.offset], &gc[s.offset], s.numel()), 0.05) << s.name;
  std::vector<float> mc = Host<float>(cpu.drafter->params().master),
                     mg = Host<float>(gpu.drafter->params().master);
  std::vector<float> uc(mc.size()), ug(mg.size());
  for (size_t i = 0; i < mc.size(); ++i) {
    uc[i] = mc[i] - before[i];
    ug[i] = mg[i] - before[i];
  }
  // Adam's first step is ~lr * sign(g): entries whose gradient is near zero may flip sign
  // between the two paths; they are few, so the update differs by < 20% in L2.
  EXPECT_LT(RelL2(ug.data(), uc.data(), static_cast<int64_t>(uc.size())), 0.2);
  EXPECT_EQ(Host<int32_t>(gpu.drafter->params().step)[0], 1);
}

TEST(DFlashDrafterCudaTest, StaleGradientsOverwrittenAndNoWeightedRows) {
  Inputs in = MakeInputs();
  Side gpu;
  MakeSide(in, Device::Cuda(0), in.plan.tokens, &gpu);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  DFlashDrafter& drafter = *gpu.drafter;
  const DFlashTargetHead& head = gpu.head;
  const std::vector<TensorView>& ctx = gpu.ctx;
  DFlashParams& p = drafter.params();
  ASSERT_TRUE(kernels::FillZero(p.grads, nullptr).ok());
  ASSERT_TRUE(drafter.ForwardBackward(head, ctx, 0.0f, 7, 3, true).ok());
  const std::vector<float> want = Host<float>(p.grads);
  // Matrix gradients are written by beta = 0 GEMMs, not zeroed first: over NaN-poisoned
  // gradients (padding left zero, as Create leaves it) the same step must give the same
  // gradients. Bitwise is too strict if a CUDA kernel reduces with atomics, so: all finite
  // and within 1e-3 relative L2 per tensor (run-to-run reduction-order noise is ~1e-6; a
  // missed first write leaves NaN).
  std::vector<float> poison = want;
  for (const DFlashParamSpec& s : p.layout.specs)
    std::fill_n(poison.begin() + s.offset, s.numel(), std::numeric_limits<float>::quiet_NaN());
  ASSERT_TRUE(kernels::CopyFromHost(p.grads, poison.data(), nullptr).ok());
  ASSERT_TRUE(drafter.ForwardBackward(head, ctx, 0.0f, 7, 3, true).ok());
  const std::vector<float> got = Host<float>(p.grads);
  for (const DFlashParamSpec& s : p.layout.specs) {
    for (int64_t i = s.offset; i < s.offset + s.numel(); ++i)
      ASSERT_TRUE(std::isfinite(got[i])) << s.name << " element " << i - s.offset;
    EXPECT_LT(RelL2(&got[s.offset], &want[s.offset], s.numel()), 1e-3) << s.name;
  }
  // No row with loss weight: the LM head is skipped; loss 0, nothing correct, zero grads.
  for (float& w : in.plan.weights) w = 0.0f;
  ASSERT_TRUE(drafter.SetPlan(in.plan).ok());
  ASSERT_TRUE(drafter.ForwardBackward(head, ctx, 0.0f, 7, 3, true).ok());
  EXPECT_EQ(Host<float>(drafter.loss())[0], 0.0f);
  for (uint8_t c : Host<uint8_t>(drafter.correct())) ASSERT_EQ(c, 0);
  const std::vector<float> zero = Host<float>(p.grads);
  for (const DFlashParamSpec& s : p.layout.specs)
    for (int64_t i = s.offset; i < s.offset + s.numel(); ++i)
      ASSERT_EQ(zero[i], 0.0f) << s.name << " element " << i - s.offset;
}

}  // namespace
}  // namespace tandem::models
