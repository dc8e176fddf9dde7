// CheckpointSnapshot on CUDA: a snapshot taken on its own copy stream while the
// next steps are already queued equals, bit for bit, a copy ordered on the compute stream at
// the same step; training did go on (the weights moved afterwards). The drafter is large
// enough (~6 M parameters, 84 MB of state) that an optimizer update not ordered after the
// copy (BeforeUpdate) would overwrite the weights while they are being copied.
#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "actors/dflash/checkpoint/checkpoint_snapshot.h"
#include "kernels/core/device_pools.h"
#include "kernels/core/memory.h"
#include "kernels/core/pinned_allocator.h"
#include "kernels/core/stream.h"
#include "models/dflash/dflash_test_util.h"
#include "models/dflash/dflash_trainer.h"

namespace tandem::dflash {
namespace {

using kernels::DType;
using kernels::Tensor;

models::DFlashConfig Config() {
  models::DFlashConfig c = models::testing::TinyDFlashConfig();
  c.layers.hidden_size = 512;
  c.layers.head_dim = 64;
  c.layers.rotary_dim = 64;
  c.layers.intermediate_size = 1536;
  c.layers.vocab_size = 256;
  c.mask_token_id = 255;
  return c;
}

bool Same(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

TEST(CheckpointSnapshotGpuTest, SnapshotIsTheStateAtItsStepWhileTrainingGoesOn) {
  const kernels::Device dev = kernels::Device::Cuda(0);
  kernels::DevicePools pools;  // this test's own; first: outlives the stream's work and tensors
  kernels::CachingPool* pool = pools.Pool(0).value();
  const models::DFlashConfig config = Config();
  const int64_t v = config.layers.vocab_size, h = config.layers.hidden_size;
  auto stream = kernels::CudaStream::Create(0);
  ASSERT_TRUE(stream.ok());
  models::DFlashTrainOptions o;
  o.max_tokens = 256;
  o.anchors_per_batch = 8;
  o.total_steps = 100;
  o.lr = 1e-3f;
  o.seed = 5;
  auto trainer = models::DFlashTrainer::Create(config, o, *pool, stream->get());
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  models::DFlashTrainer& t = **trainer;
  ASSERT_TRUE(t.drafter().params().InitFromScratch(o.seed, stream->get()).ok());

  const models::testing::HostBatch batch = models::testing::MakeBatch({100, 60, 90}, v, 3);
  const int64_t tokens = static_cast<int64_t>(batch.ids.size());
  auto upload = [&](const std::vector<kernels::bf16>& host, kernels::Shape shape) {
    auto d = Tensor::Empty(*pool, DType::kBF16, shape, stream->get());
    EXPECT_TRUE(d.ok());
    EXPECT_TRUE(kernels::CopyFromHost(*d, host.data(), stream->get()).ok());
    return std::move(*d);
  };
  const auto emb_h = models::testing::RandomBf16(v * h, 1.0f, 1);
  const auto lm_h = models::testing::RandomBf16(v * h, 0.3f, 2);
  const auto c0_h = models::testing::RandomBf16(tokens * h, 1.0f, 3);
  const auto c1_h = models::testing::RandomBf16(tokens * h, 1.0f, 4);
  Tensor emb = upload(emb_h, {v, h}), lm = upload(lm_h, {v, h});
  Tensor c0 = upload(c0_h, {tokens, h}), c1 = upload(c1_h, {tokens, h});
  const models::DFlashTargetHead head{emb.view(), lm.view()};
  const std::vector<kernels::TensorView> ctx = {c0.view(), c1.view()};
  ASSERT_TRUE(stream->Synchronize().ok());

  auto snapshot = CheckpointSnapshot::Create(t.drafter().params().layout, dev);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status().ToString();
  auto step = [&] {
    ASSERT_TRUE(t.ForwardBackward(head, batch.meta(), ctx).ok());
    ASSERT_TRUE((*snapshot)->BeforeUpdate(stream->get()).ok());
    ASSERT_TRUE(t.OptimizerStep().ok());
  };
  for (int i = 0; i < 2; ++i) step();
  // The reference: the state after step 2, copied in order on the compute stream.
  kernels::PinnedAllocator pinned;
  auto ref = models::DFlashHostState::Allocate(t.drafter().params().layout, pinned);
  ASSERT_TRUE(ref.ok());
  ASSERT_TRUE(models::CopyDFlashState(t.drafter(), *ref, stream->get()).ok());
  // The snapshot at the same point, then three more steps queued behind it, no host sync.
  ASSERT_TRUE((*snapshot)->Take(t.drafter()).ok());
  for (int i = 0; i < 3; ++i) step();
  auto secs = (*snapshot)->WaitCopied();
  ASSERT_TRUE(secs.ok()) << secs.status().ToString();
  EXPECT_GT(*secs, 0.0);
  ASSERT_TRUE(stream->Synchronize().ok());
  const models::DFlashHostState& got = (*snapshot)->host();
  EXPECT_TRUE(Same(got.weights, ref->weights));
  EXPECT_TRUE(Same(got.master, ref->master));
  EXPECT_TRUE(Same(got.adam_m, ref->adam_m));
  EXPECT_TRUE(Same(got.adam_v, ref->adam_v));
  EXPECT_TRUE(Same(got.step, ref->step));
  EXPECT_EQ(*got.step.view().data_as<int32_t>(), 2);
  // Training went on: the master weights now differ from the snapshot's.
  auto now = models::DFlashHostState::Allocate(t.drafter().params().layout, pinned);
  ASSERT_TRUE(now.ok());
  ASSERT_TRUE(models::CopyDFlashState(t.drafter(), *now, stream->get()).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  EXPECT_FALSE(Same(now->master, got.master));
  EXPECT_EQ(*now->step.view().data_as<int32_t>(), 5);
}

}  // namespace
}  // namespace tandem::dflash
