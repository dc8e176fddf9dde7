// The DFlash2 drafter on CUDA against the CPU path: one forward + backward + AdamW step from
// identical parameters and inputs (input embedding scale, 3-tap convolutions, multiplier and
// soft cap, the candidate selector); the DFlash loss, the selector loss and its stats, every
// gradient tensor and the weight update agree within bf16-level tolerances, and a step
// allocates nothing from the device pool. Label gpu; skips without a CUDA device.
#include <algorithm>
#include <cmath>
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

// The tiny DFlash2 drafter with the smallest head_dim the DFlash attention CUDA kernels take
// (64). Top-k = vocab = 64: every loss row is covered whatever the rounding, so the CPU and
// CUDA selectors see the same candidate sets (with k < V a logit at the k-th place can swap
// with its neighbour between the two paths; the top-k kernels' own tests cover that rule).
DFlashConfig CudaTinyDFlash2Config() {
  DFlashConfig c = testing::TinyDFlash2Config();
  c.layers.vocab_size = 64;
  c.mask_token_id = 63;
  c.layers.head_dim = 64;
  c.layers.rotary_dim = 64;
  DFlash2Extension& e = *c.dflash2;
  e.conv_kernel_size = 3;
  e.conv_group_size = 8;
  e.selector_rank = 8;
  e.selector_top_k = 64;
  e.output_multiplier = 0.8;
  e.final_logit_softcapping = 6.0;
  e.input_embedding_scale = 1.5;
  return c;
}

struct Inputs {
  DFlashConfig config = CudaTinyDFlash2Config();
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
  auto plan = BuildBlockPlan(batch.meta(), *anchors, 12, 16,
                             static_cast<int32_t>(in.config.mask_token_id), 7.0);
  EXPECT_TRUE(plan.ok());
  in.plan = std::move(*plan);
  const int64_t t = in.plan.tokens;
  in.emb = testing::RandomBf16(v * h, 1.0f, 1);
  in.lm = testing::RandomBf16(v * h, 0.3f, 2);
  in.ctx = {testing::RandomBf16(t * h, 1.0f, 3), testing::RandomBf16(t * h, 1.0f, 4)};
  return in;
}

// A drafter on one device with the same randomized parameters, the plan set, and its own
// copies of the inputs.
struct Side {
  std::unique_ptr<kernels::DevicePools> pools;  // first: outlives everything below
  std::unique_ptr<DFlashDrafter> drafter;
  std::vector<Tensor> owned;  // the device copies
  DFlashTargetHead head;
  std::vector<TensorView> ctx;
};

void MakeSide(const Inputs& in, Device dev, Side* side) {
  const int64_t v = in.config.layers.vocab_size, h = in.config.layers.hidden_size;
  side->pools = std::make_unique<kernels::DevicePools>();
  kernels::Allocator* alloc = side->pools->For(dev).value();
  DFlashDrafterOptions options{in.plan.tokens + 5, 12, 64};
  options.selector_loss_weight = 0.7f;
  auto d = DFlashDrafter::Create(in.config, options, *alloc, nullptr);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  side->drafter = std::move(*d);
  auto upload = [&](const std::vector<bf16>& host, Shape shape) {
    return testing::Upload(*alloc, host, shape, &side->owned);
  };
  side->head = {upload(in.emb, Shape{v, h}), upload(in.lm, Shape{v, h})};
  for (const std::vector<bf16>& c : in.ctx)
    side->ctx.push_back(upload(c, Shape{in.plan.tokens, h}));
  testing::RandomizeDFlash2Params(side->drafter->params(), 8);
  ASSERT_TRUE(side->drafter->SetPlan(in.plan).ok());
}

TEST(DFlash2DrafterCudaTest, StepMatchesCpu) {
  const Inputs in = MakeInputs();
  Side cpu, gpu;
  MakeSide(in, Device::Cpu(), &cpu);
  MakeSide(in, Device::Cuda(0), &gpu);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  const std::vector<float> before = Host<float>(gpu.drafter->params().master);
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
  // Both are bf16-activation paths that differ in accumulation order and in where fp32
  // values round to bf16 (cuBLASLt vs the blocked CPU GEMM, fused CE chunks, the
  // selector's float atomics): a few bf16 ulps per op, 1% of a loss as in the DFlash test.
  const float lc = Host<float>(cpu.drafter->loss())[0], lg = Host<float>(gpu.drafter->loss())[0];
  EXPECT_NEAR(lg, lc, 1e-2 * std::abs(lc));
  const float sc = Host<float>(cpu.drafter->selector_loss())[0],
              sg = Host<float>(gpu.drafter->selector_loss())[0];
  EXPECT_GT(sc, 0.0f);
  EXPECT_NEAR(sg, sc, 1e-2 * std::abs(sc));
  // Covered rows: every loss row (top-k = vocab). Correct rows may differ where the
  // selector's best two scores are within rounding of each other: a row or two.
  const std::vector<int32_t> stc = Host<int32_t>(cpu.drafter->selector_stats()),
                             stg = Host<int32_t>(gpu.drafter->selector_stats());
  EXPECT_EQ(stc[0], cpu.drafter->loss_rows());
  EXPECT_EQ(stg[0], stc[0]);
  EXPECT_LE(std::abs(stg[1] - stc[1]), 2) << stg[1] << " vs " << stc[1];
  const std::vector<float> gc = Host<float>(cpu.drafter->params().grads),
                           gg = Host<float>(gpu.drafter->params().grads);
  for (const DFlashParamSpec& s : cpu.drafter->params().layout.specs) {
    // 5% relative L2 per tensor: the bound both paths meet against float64 (the golden and
    // the FD test); an unscaled embedding, a missing conv side or selector term is O(1).
    double ref2 = 0;
    for (int64_t i = 0; i < s.numel(); ++i) ref2 += double(gc[s.offset + i]) * gc[s.offset + i];
    EXPECT_GT(ref2, 0.0) << s.name << ": zero gradient";
    EXPECT_LT(RelL2(&gg[s.offset], &gc[s.offset], s.numel()), 0.05) << s.name;
  }
  const std::vector<float> mc = Host<float>(cpu.drafter->params().master),
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

}  // namespace
}  // namespace tandem::models
