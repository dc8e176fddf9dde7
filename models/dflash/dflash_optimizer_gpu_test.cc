// The overlapped optimizer on CUDA (label gpu): the update runs on a second stream that the
// test delays with a spin kernel, so a forward that did not wait for its layer's update would
// read stale weights. Against a serial drafter fed the same gradients, three steps give
// bitwise the same weights, bf16 copy, m, v, step counter and next-forward loss and hidden.
#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/core/device_pools.h"
#include "kernels/core/memory.h"
#include "kernels/core/stream.h"
#include "models/dflash/dflash_drafter.h"
#include "models/dflash/dflash_gpu_test_util.h"
#include "models/dflash/dflash_test_util.h"
#include "runtime/testing/gpu_spin_kernel.h"

namespace tandem::models {
namespace {

using kernels::bf16;
using kernels::Device;
using kernels::DType;
using kernels::Shape;
using kernels::Tensor;
using kernels::TensorView;

using testing::Host;

// The tiny drafter with the smallest head_dim the CUDA attention takes (64), 3 layers.
DFlashConfig Config() {
  DFlashConfig c = testing::TinyDFlashConfig();
  c.layers.hidden_size = 64;
  c.layers.head_dim = 64;
  c.layers.rotary_dim = 64;
  c.layers.intermediate_size = 96;
  c.layers.vocab_size = 256;
  c.layers.num_hidden_layers = 3;
  c.layers.layer_types = {LayerType::kSlidingAttention, LayerType::kSlidingAttention,
                          LayerType::kFullAttention};
  c.mask_token_id = 255;
  return c;
}

struct Side {
  std::unique_ptr<kernels::DevicePools> pools;  // first: outlives everything below
  std::unique_ptr<DFlashDrafter> drafter;
  std::vector<Tensor> owned;
  DFlashTargetHead head;
  std::vector<TensorView> ctx;
};

void MakeSide(const DFlashConfig& c, const DFlashBlockPlan& plan, Side* side) {
  const int64_t v = c.layers.vocab_size, h = c.layers.hidden_size;
  side->pools = std::make_unique<kernels::DevicePools>();
  kernels::Allocator* alloc = side->pools->Pool(0).value();
  auto d = DFlashDrafter::Create(c, {plan.tokens, plan.num_blocks, 64}, *alloc, nullptr);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  side->drafter = std::move(*d);
  auto upload = [&](const std::vector<bf16>& host, Shape shape) {
    Result<Tensor> made = Tensor::Empty(*alloc, DType::kBF16, shape, nullptr);
    EXPECT_TRUE(made.ok());
    Tensor x = std::move(made).value();
    EXPECT_TRUE(kernels::CopyFromHost(x, host.data(), nullptr).ok());
    TensorView view = x;
    side->owned.push_back(std::move(x));
    return view;
  };
  side->head = {upload(testing::RandomBf16(v * h, 1.0f, 1), Shape{v, h}),
                upload(testing::RandomBf16(v * h, 0.3f, 2), Shape{v, h})};
  for (uint64_t seed : {3, 4})
    side->ctx.push_back(upload(testing::RandomBf16(plan.tokens * h, 1.0f, seed),
                               Shape{plan.tokens, h}));
  testing::RandomizeParams(side->drafter->params(), 8);
  ASSERT_TRUE(side->drafter->SetPlan(plan).ok());
}

void ExpectBitwise(const Tensor& a, const Tensor& b, const char* what) {
  const std::vector<unsigned char> x = Host<unsigned char>(TensorView(
      a.data(), DType::kU8, Shape{a.nbytes()}, a.view().device()));
  const std::vector<unsigned char> y = Host<unsigned char>(TensorView(
      b.data(), DType::kU8, Shape{b.nbytes()}, b.view().device()));
  ASSERT_EQ(x.size(), y.size());
  EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size()), 0) << what << " differs";
}

TEST(DFlashOptimizerOverlapCudaTest, DelayedUpdateIsWaitedForAndBitwiseSerial) {
  if (kernels::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const DFlashConfig c = Config();
  testing::HostBatch batch = testing::MakeBatch({70, 33, 57}, c.layers.vocab_size, 3);
  auto anchors = SampleAnchors(batch.meta(), 12, 1, 0);
  ASSERT_TRUE(anchors.ok());
  auto plan = BuildBlockPlan(batch.meta(), *anchors, 12, 16, 255, 7.0);
  ASSERT_TRUE(plan.ok());
  Side serial, overlap;
  MakeSide(c, *plan, &serial);
  MakeSide(c, *plan, &overlap);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  DFlashDrafter &a = *serial.drafter, &b = *overlap.drafter;
  ASSERT_TRUE(b.SetOptimizerOverlap(true).ok());
  ASSERT_NE(b.optimizer_stream(), nullptr);
  kernels::AdamWConfig cfg;
  cfg.lr = 2e-2f;  // a large step: stale weights would change the next loss visibly
  cfg.weight_decay = 0.1f;
  for (int step = 0; step < 4; ++step) {
    ASSERT_TRUE(a.ForwardBackward(serial.head, serial.ctx, 0.05f, 9, step, step < 3).ok());
    ASSERT_TRUE(b.ForwardBackward(overlap.head, overlap.ctx, 0.05f, 9, step, step < 3).ok());
    // The forwards read the same weights: the overlapped one waited for every update.
    const std::vector<float> la = Host<float>(a.loss()), lb = Host<float>(b.loss());
    ASSERT_EQ(la[0], lb[0]) << "step " << step;
    const std::vector<bf16> ha = Host<bf16>(a.final_hidden()), hb = Host<bf16>(b.final_hidden());
    ASSERT_EQ(std::memcmp(ha.data(), hb.data(), ha.size() * sizeof(bf16)), 0) << "step " << step;
    if (step == 3) break;
    // The same gradients on both sides, whatever the backward's reduction order.
    const std::vector<float> g = Host<float>(a.params().grads);
    ASSERT_TRUE(kernels::CopyFromHost(b.params().grads, g.data(), nullptr).ok());
    ASSERT_TRUE(a.OptimizerStep(cfg, 0.5f).ok());
    // Hold the optimizer stream for 20 ms: the update runs after the next forward is queued.
    ASSERT_EQ(tandem::testing::LaunchSpin(20'000'000, b.optimizer_stream()), cudaSuccess);
    ASSERT_TRUE(b.OptimizerStep(cfg, 0.5f).ok());
  }
  const DFlashParams &pa = a.params(), &pb = b.params();
  ExpectBitwise(pa.master, pb.master, "master");
  ExpectBitwise(pa.compute, pb.compute, "compute");
  ExpectBitwise(pa.adam_m, pb.adam_m, "adam_m");
  ExpectBitwise(pa.adam_v, pb.adam_v, "adam_v");
  EXPECT_EQ(Host<int32_t>(pb.step)[0], 3);
}

}  // namespace
}  // namespace tandem::models
