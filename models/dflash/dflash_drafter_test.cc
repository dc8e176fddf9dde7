// DFlash drafter on the CPU: forward against a float64 reference, backward against central
// finite differences of that reference, loss falling under AdamW, anchors and block tables.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "models/dflash/dflash_drafter.h"
#include "models/dflash/dflash_test_reference.h"
#include "models/dflash/dflash_test_util.h"

namespace tandem::models {
namespace {

using kernels::bf16;
using kernels::DType;
using kernels::Shape;
using kernels::TensorView;
using testing::HostBatch;

std::vector<double> ToDouble(const std::vector<bf16>& v) {
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) d[i] = v[i].f();
  return d;
}

// A tiny drafter on the CPU with a batch of two documents (24 + 20 tokens), 3 sampled
// anchors in 4 blocks (one padding block), random context layers and target head.
class DrafterCpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = testing::TinyDFlashConfig();
    const int64_t v = config_.layers.vocab_size, h = config_.layers.hidden_size;
    batch_ = testing::MakeBatch({24, 20}, v, 11);
    auto anchors = SampleAnchors(batch_.meta(), 3, /*seed=*/5, /*step=*/0);
    ASSERT_TRUE(anchors.ok()) << anchors.status().ToString();
    auto plan = BuildBlockPlan(batch_.meta(), *anchors, 4, 16, 63, 7.0);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    plan_ = *plan;
    const int64_t t = plan_.tokens;
    embedding_ = testing::RandomBf16(v * h, 1.0f, 21);
    lm_head_ = testing::RandomBf16(v * h, 0.3f, 22);
    for (int i = 0; i < 2; ++i) context_.push_back(testing::RandomBf16(t * h, 1.0f, 30 + i));
    auto d = DFlashDrafter::Create(config_, {t, 4, 32}, kernels::HostAllocator(), nullptr);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    drafter_ = std::move(*d);
    testing::RandomizeParams(drafter_->params(), 3);
    ASSERT_TRUE(drafter_->SetPlan(plan_).ok());
  }

  DFlashTargetHead Head() {
    const int64_t v = config_.layers.vocab_size, h = config_.layers.hidden_size;
    return {TensorView(embedding_.data(), DType::kBF16, Shape{v, h}),
            TensorView(lm_head_.data(), DType::kBF16, Shape{v, h})};
  }
  std::vector<TensorView> Context() {
    std::vector<TensorView> out;
    for (auto& c : context_)
      out.emplace_back(c.data(), DType::kBF16, Shape{plan_.tokens, config_.layers.hidden_size});
    return out;
  }
  Status Run(bool backward) {
    std::vector<TensorView> ctx = Context();
    return drafter_->ForwardBackward(Head(), ctx, 0.0f, 0, 0, backward);
  }
  float Loss() const { return drafter_->loss().data_as<float>()[0]; }

  testing::DFlashReference Reference(testing::RefInputs* in) {
    in->config = &config_;
    in->layout = &drafter_->params().layout;
    in->plan = &plan_;
    for (auto& c : context_) in->context.push_back(ToDouble(c));
    in->embedding = ToDouble(embedding_);
    in->lm_head = ToDouble(lm_head_);
    return testing::DFlashReference(*in);
  }
  std::vector<double> ComputeParams() {
    const DFlashParams& p = drafter_->params();
    std::vector<double> out(p.layout.total);
    for (int64_t i = 0; i < p.layout.total; ++i) out[i] = p.compute.view().data_as<bf16>()[i].f();
    return out;
  }

  DFlashConfig config_;
  HostBatch batch_;
  DFlashBlockPlan plan_;
  std::vector<bf16> embedding_, lm_head_;
  std::vector<std::vector<bf16>> context_;
  std::unique_ptr<DFlashDrafter> drafter_;
};

TEST_F(DrafterCpuTest, ForwardMatchesFloat64Reference) {
  ASSERT_TRUE(Run(false).ok());
  testing::RefInputs in;
  const double ref = Reference(&in).Loss(ComputeParams());
  // bf16 activations (8-bit mantissa, relative rounding 2^-9 per op) through ~20 chained ops
  // of two layers: the loss (a mean of ~40 CEs around 4) moves by well under 1%.
  EXPECT_NEAR(Loss(), ref, 1e-2 * std::abs(ref)) << "reference " << ref;
  EXPECT_GT(ref, 0.5);
}

TEST_F(DrafterCpuTest, BackwardMatchesFiniteDifferences) {
  ASSERT_TRUE(Run(true).ok());
  testing::RefInputs in;
  const testing::DFlashReference ref = Reference(&in);
  std::vector<double> p = ComputeParams();
  const DFlashParams& params = drafter_->params();
  const float* grads = params.grads.view().data_as<float>();
  std::mt19937 rng(1);
  for (const DFlashParamSpec& s : params.layout.specs) {
    // Up to 6 random entries per tensor; central differences in float64 (truncation error
    // O(eps^2) ~ 1e-8 relative, far below the bf16 error being measured).
    double err2 = 0, ref2 = 0;
    for (int n = 0; n < 6; ++n) {
      const int64_t i = s.offset + std::uniform_int_distribution<int64_t>(0, s.numel() - 1)(rng);
      const double keep = p[i], eps = 1e-4;
      p[i] = keep + eps;
      const double up = ref.Loss(p);
      p[i] = keep - eps;
      const double down = ref.Loss(p);
      p[i] = keep;
      const double fd = (up - down) / (2 * eps);
      err2 += (grads[i] - fd) * (grads[i] - fd);
      ref2 += fd * fd;
    }
    // The analytic gradient is computed with bf16 activations and activation gradients
    // (as a bf16 PyTorch run); its relative error against the exact gradient is a few
    // bf16 roundings (~2^-8 each) accumulated through the layers: 5% bounds it, while a
    // missing or wrong path (e.g. the context branch of k_proj) gives O(1) errors.
    ASSERT_GT(ref2, 0.0) << s.name << ": zero gradient";
    EXPECT_LT(std::sqrt(err2 / ref2), 0.05) << s.name;
  }
}

// A forward-only drafter over another's weights (the eval during training): the same
// forward bit for bit without parameters of its own, following the owner's updates; no
// backward, no optimizer.
// What validation counts for the drafter (actors/dflash: the device-memory bound) is what
// Create allocates.
TEST_F(DrafterCpuTest, WorkspaceBytesIsWhatCreateAllocates) {
  const DFlashDrafterOptions o{plan_.tokens, 4, 32};
  auto measured = DFlashDrafter::WorkspaceBytes(config_, o, kernels::Device::Cpu());
  ASSERT_TRUE(measured.ok()) << measured.status().ToString();
  EXPECT_EQ(*measured, drafter_->workspace_bytes());
  const DFlashParams& p = drafter_->params();
  EXPECT_EQ(DFlashParams::DeviceBytes(p.layout), p.master.nbytes() + p.compute.nbytes() +
                                                     p.grads.nbytes() + p.adam_m.nbytes() +
                                                     p.adam_v.nbytes() + p.step.nbytes());
  // More blocks, more rows: a larger workspace.
  auto more = DFlashDrafter::WorkspaceBytes(config_, {plan_.tokens, 8, 32}, kernels::Device::Cpu());
  ASSERT_TRUE(more.ok());
  EXPECT_GT(*more, *measured);
  EXPECT_FALSE(DFlashDrafter::WorkspaceBytes(config_, {0, 4, 32}, kernels::Device::Cpu()).ok());
}

TEST_F(DrafterCpuTest, SharedWeightsForwardTheOwnersWeightsOnly) {
  ASSERT_TRUE(Run(false).ok());
  const float owner_loss = Loss();
  DFlashDrafterOptions o = drafter_->options();
  o.shared_weights = &drafter_->params();
  auto shared = DFlashDrafter::Create(config_, o, kernels::HostAllocator(), nullptr);
  ASSERT_TRUE(shared.ok()) << shared.status().ToString();
  DFlashDrafter& d = **shared;
  EXPECT_TRUE(d.params().master.view().empty());
  ASSERT_TRUE(d.SetPlan(plan_).ok());
  std::vector<TensorView> ctx = Context();
  ASSERT_TRUE(d.ForwardBackward(Head(), ctx, 0.0f, 0, 0, /*backward=*/false).ok());
  EXPECT_EQ(d.loss().data_as<float>()[0], owner_loss);
  // The owner's next update is what the shared drafter reads.
  testing::RandomizeParams(drafter_->params(), 4);
  ASSERT_TRUE(Run(false).ok());
  ASSERT_TRUE(d.ForwardBackward(Head(), ctx, 0.0f, 0, 0, /*backward=*/false).ok());
  EXPECT_EQ(d.loss().data_as<float>()[0], Loss());
  EXPECT_NE(Loss(), owner_loss);
  EXPECT_FALSE(d.ForwardBackward(Head(), ctx, 0.0f, 0, 0, /*backward=*/true).ok());
  EXPECT_FALSE(d.OptimizerStep({}, 1.0f).ok());
  // A config of another size is refused.
  DFlashConfig other = config_;
  other.layers.num_hidden_layers = 1;
  other.layers.layer_types.resize(1);
  EXPECT_FALSE(DFlashDrafter::Create(other, o, kernels::HostAllocator(), nullptr).ok());
}

TEST_F(DrafterCpuTest, BackwardOverwritesStaleGradients) {
  // Matrix gradients are written by beta = 0 GEMMs instead of being zeroed first: a run
  // over NaN-filled gradients must give bitwise the gradients of a run over zeros, so a
  // matrix (or part of one) that is never overwritten shows up as NaN or a changed bit.
  DFlashParams& p = drafter_->params();
  float* g = p.grads.view().data_as<float>();
  std::fill_n(g, p.layout.total, 0.0f);
  ASSERT_TRUE(Run(true).ok());
  const std::vector<float> want(g, g + p.layout.total);
  // Every tensor's gradient is poisoned; the padding between tensors is zero by contract
  // (Create zero-fills it and nothing writes it), so it is left as is.
  for (const DFlashParamSpec& s : p.layout.specs)
    std::fill_n(g + s.offset, s.numel(), std::numeric_limits<float>::quiet_NaN());
  ASSERT_TRUE(Run(true).ok());
  for (const DFlashParamSpec& s : p.layout.specs)
    for (int64_t i = s.offset; i < s.offset + s.numel(); ++i)
      ASSERT_EQ(std::memcmp(&g[i], &want[i], sizeof(float)), 0)
          << s.name << " element " << i - s.offset << ": " << g[i] << " vs " << want[i];
}

TEST_F(DrafterCpuTest, SkippedRowsAndNoWeightedRows) {
  // The LM head runs only on rows with loss weight; the others read back as not correct.
  ASSERT_TRUE(Run(true).ok());
  const uint8_t* correct = drafter_->correct().data_as<uint8_t>();
  ASSERT_EQ(drafter_->correct().numel(), drafter_->rows());
  for (int64_t r = 0; r < drafter_->rows(); ++r) {
    if (plan_.weights[r] == 0.0f) {
      EXPECT_EQ(correct[r], 0) << "row " << r;
    }
  }
  // No row with weight: loss 0, nothing correct, every gradient exactly 0 (no LM head runs;
  // stale gradients from the run above are overwritten).
  for (float& w : plan_.weights) w = 0.0f;
  ASSERT_TRUE(drafter_->SetPlan(plan_).ok());
  ASSERT_TRUE(Run(true).ok());
  EXPECT_EQ(Loss(), 0.0f);
  for (int64_t r = 0; r < drafter_->rows(); ++r) EXPECT_EQ(correct[r], 0) << "row " << r;
  const DFlashParams& p = drafter_->params();
  const float* g = p.grads.view().data_as<float>();
  for (const DFlashParamSpec& s : p.layout.specs)
    for (int64_t i = s.offset; i < s.offset + s.numel(); ++i)
      ASSERT_EQ(g[i], 0.0f) << s.name << " element " << i - s.offset;
}

TEST_F(DrafterCpuTest, LossFallsUnderAdamW) {
  kernels::AdamWConfig cfg;
  cfg.lr = 3e-3f;
  float first = 0, last = 0;
  for (int step = 0; step < 25; ++step) {
    ASSERT_TRUE(Run(true).ok());
    if (step == 0) first = Loss();
    last = Loss();
    ASSERT_TRUE(drafter_->OptimizerStep(cfg, 1.0f).ok());
  }
  // Memorising one fixed batch: a working optimizer and backward drop the loss far below
  // its start; a broken sign or gradient would not.
  EXPECT_LT(last, 0.5f * first) << first << " -> " << last;
  EXPECT_EQ(drafter_->params().step.view().data_as<int32_t>()[0], 25);
}

TEST(DFlashAnchorsTest, EligibilityDeterminismAndFairness) {
  HostBatch b = testing::MakeBatch({10, 3, 30}, 64, 2);
  auto all = EligibleAnchors(b.meta());
  ASSERT_TRUE(all.ok());
  for (int32_t a : *all) {
    EXPECT_TRUE(b.mask[a] && b.mask[a + 1]) << a;
    EXPECT_TRUE(a + 1 != 10 && a + 1 != 13) << "crosses a document end: " << a;
  }
  EXPECT_EQ(all->size(), 6u + 0u + 26u);
  auto s1 = SampleAnchors(b.meta(), 5, 7, 3), s2 = SampleAnchors(b.meta(), 5, 7, 3),
       s3 = SampleAnchors(b.meta(), 5, 7, 4);
  ASSERT_TRUE(s1.ok() && s2.ok() && s3.ok());
  EXPECT_EQ(*s1, *s2);
  EXPECT_NE(*s1, *s3);
  // Both documents with eligible anchors get one before any gets a second.
  auto two = SampleAnchors(b.meta(), 2, 1, 0);
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->size(), 2u);
  EXPECT_LT((*two)[0], 10);
  EXPECT_GE((*two)[1], 13);
}

TEST(DFlashAnchorsTest, BlockPlanTablesAndDocumentEnd) {
  HostBatch b = testing::MakeBatch({10, 30}, 64, 2);
  const std::vector<int32_t> anchors = {5, 14};
  auto p = BuildBlockPlan(b.meta(), anchors, 3, 16, 63, 7.0);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->block_ids[0], b.ids[5]);
  EXPECT_EQ(p->block_ids[1], 63);
  EXPECT_EQ(p->block_pos[3], 8);
  EXPECT_EQ(p->doc_start[1], 10);
  EXPECT_EQ(p->block_pos[16], 4);  // position restarts in document 2
  // Block 0: slots 1..4 predict tokens 6..9; slot 5 would cross the document end.
  EXPECT_EQ(p->targets[1], b.ids[6]);
  EXPECT_FLOAT_EQ(p->weights[1], 1.0f);
  EXPECT_FLOAT_EQ(p->weights[4], std::exp(-3.0f / 7.0f));
  EXPECT_EQ(p->targets[5], -1);
  EXPECT_EQ(p->weights[5], 0.0f);
  EXPECT_EQ(p->targets[0], -1);
  // Padding block: no loss.
  for (int j = 0; j < 16; ++j) EXPECT_EQ(p->weights[32 + j], 0.0f);
  const std::vector<int32_t> bad = {9};  // 9 -> 10 crosses a document end
  EXPECT_FALSE(BuildBlockPlan(b.meta(), bad, 3, 16, 63, 7.0).ok());
}

}  // namespace
}  // namespace tandem::models
