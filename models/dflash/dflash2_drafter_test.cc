// The DFlash2 drafter on the CPU (reference kernels): a fresh DFlash2 drafter (identity
// convolutions, zero projections and successor codebook) computes the DFlash drafter's loss
// on the same weights; the forward against the float64 reference (dflash_test_reference.h);
// every tensor's gradient, the new ones included, against central finite differences of
// it; the selector's metrics; the input embedding scale; the total loss falling under AdamW.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
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

std::vector<double> ToDouble(const std::vector<bf16>& v) {
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) d[i] = v[i].f();
  return d;
}

// Sets master (and compute) of every tensor whose name ends with `suffix` to `value`.
void SetTensors(DFlashParams& p, const std::string& suffix, float value) {
  float* m = p.master.view().data_as<float>();
  for (const DFlashParamSpec& s : p.layout.specs)
    if (s.name.ends_with(suffix)) std::fill_n(m + s.offset, s.numel(), value);
  ASSERT_TRUE(p.SyncCompute(nullptr).ok());
}

// The identity convolution: tap 0 of both sides 1, the other taps 0.
void SetIdentityConvs(DFlashParams& p) {
  float* m = p.master.view().data_as<float>();
  for (const DFlashParamSpec& s : p.layout.specs) {
    if (!s.name.ends_with("base_kernel")) continue;
    const int64_t taps = s.shape[1], h = s.shape[2];
    for (int64_t i = 0; i < s.numel(); ++i) m[s.offset + i] = (i / h) % taps == 0 ? 1.0f : 0.0f;
  }
  ASSERT_TRUE(p.SyncCompute(nullptr).ok());
}

class DFlash2DrafterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = testing::TinyDFlash2Config();
    config_.dflash2->selector_top_k = 16;  // covers enough targets of random weights
    const int64_t v = config_.layers.vocab_size, h = config_.layers.hidden_size;
    batch_ = testing::MakeBatch({24, 20}, v, 11);
    auto anchors = SampleAnchors(batch_.meta(), 3, /*seed=*/5, /*step=*/0);
    ASSERT_TRUE(anchors.ok()) << anchors.status().ToString();
    auto plan = BuildBlockPlan(batch_.meta(), *anchors, 4, 16,
                               static_cast<int32_t>(config_.mask_token_id), 7.0);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    plan_ = *plan;
    embedding_ = testing::RandomBf16(v * h, 1.0f, 21);
    lm_head_ = testing::RandomBf16(v * h, 0.3f, 22);
    for (int i = 0; i < 2; ++i)
      context_.push_back(testing::RandomBf16(plan_.tokens * h, 1.0f, 30 + i));
    drafter_ = NewDrafter(config_);
    ASSERT_TRUE(drafter_);
    testing::RandomizeDFlash2Params(drafter_->params(), 3);
  }

  std::unique_ptr<DFlashDrafter> NewDrafter(const DFlashConfig& c) {
    DFlashDrafterOptions o{plan_.tokens, 4, 32};
    o.selector_loss_weight = alpha_;
    auto d = DFlashDrafter::Create(c, o, kernels::HostAllocator(), nullptr);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    if (!d.ok()) return nullptr;
    EXPECT_TRUE((*d)->SetPlan(plan_).ok());
    return std::move(*d);
  }
  Status Run(DFlashDrafter& d, bool backward) {
    const int64_t v = config_.layers.vocab_size, h = config_.layers.hidden_size;
    const DFlashTargetHead head{TensorView(embedding_.data(), DType::kBF16, Shape{v, h}),
                                TensorView(lm_head_.data(), DType::kBF16, Shape{v, h})};
    std::vector<TensorView> ctx;
    for (auto& c : context_) ctx.emplace_back(c.data(), DType::kBF16, Shape{plan_.tokens, h});
    return d.ForwardBackward(head, ctx, 0.0f, 0, 0, backward);
  }
  static float Loss(const DFlashDrafter& d) { return d.loss().data_as<float>()[0]; }
  static float SelectorLoss(const DFlashDrafter& d) {
    return d.selector_loss().data_as<float>()[0];
  }
  testing::DFlashReference Reference(testing::RefInputs* in) {
    in->config = &config_;
    in->layout = &drafter_->params().layout;
    in->plan = &plan_;
    for (auto& c : context_) in->context.push_back(ToDouble(c));
    in->embedding = ToDouble(embedding_);
    in->lm_head = ToDouble(lm_head_);
    in->selector_weight = alpha_;
    return testing::DFlashReference(*in);
  }
  std::vector<double> ComputeParams() {
    const DFlashParams& p = drafter_->params();
    std::vector<double> out(p.layout.total);
    for (int64_t i = 0; i < p.layout.total; ++i)
      out[i] = p.compute.view().data_as<bf16>()[i].f();
    return out;
  }

  float alpha_ = 0.7f;
  DFlashConfig config_;
  testing::HostBatch batch_;
  DFlashBlockPlan plan_;
  std::vector<bf16> embedding_, lm_head_;
  std::vector<std::vector<bf16>> context_;
  std::unique_ptr<DFlashDrafter> drafter_;
};

// Identity convolutions and a zero successor codebook: the DFlash part of the loss is the
// DFlash drafter's on the same weights, and the selector's scores are the unary logits.
TEST_F(DFlash2DrafterTest, FreshDFlash2IsDFlash) {
  DFlashParams& p2 = drafter_->params();
  SetIdentityConvs(p2);
  SetTensors(p2, "kernel_projection.weight", 0.0f);
  SetTensors(p2, "successor_codebook", 0.0f);
  DFlashConfig plain = config_;
  plain.dflash2.reset();
  plain.layers.architectures = {"DFlashDraftModel"};
  std::unique_ptr<DFlashDrafter> d1 = NewDrafter(plain);
  ASSERT_TRUE(d1);
  // The DFlash drafter's tensors, copied by name.
  DFlashParams& p1 = d1->params();
  for (const DFlashParamSpec& s1 : p1.layout.specs)
    for (const DFlashParamSpec& s2 : p2.layout.specs)
      if (s1.name == s2.name)
        std::memcpy(p1.master.view().data_as<float>() + s1.offset,
                    p2.master.view().data_as<float>() + s2.offset, s1.numel() * 4);
  ASSERT_TRUE(p1.SyncCompute(nullptr).ok());
  ASSERT_TRUE(Run(*drafter_, false).ok());
  ASSERT_TRUE(Run(*d1, false).ok());
  // The same bf16 roundings in the same order except where the residual add and the norm
  // are fused in DFlash (the norm reads the fp32 sum) and separate in DFlash2.
  EXPECT_NEAR(Loss(*drafter_), Loss(*d1), 2e-3 * std::abs(Loss(*d1)));
  // The selector's scores are the unary logits: its loss is the top-k CE of the logits.
  EXPECT_GT(SelectorLoss(*drafter_), 0.0f);
}

// With alpha = 0 the selector adds no gradient to the shared tensors: a fresh DFlash2
// drafter's gradients are the DFlash drafter's (to bf16 accuracy).
TEST_F(DFlash2DrafterTest, ZeroSelectorWeightGivesDFlashGradients) {
  alpha_ = 0.0f;
  drafter_ = NewDrafter(config_);
  ASSERT_TRUE(drafter_);
  testing::RandomizeDFlash2Params(drafter_->params(), 3);
  DFlashParams& p2 = drafter_->params();
  SetIdentityConvs(p2);
  SetTensors(p2, "kernel_projection.weight", 0.0f);
  DFlashConfig plain = config_;
  plain.dflash2.reset();
  plain.layers.architectures = {"DFlashDraftModel"};
  std::unique_ptr<DFlashDrafter> d1 = NewDrafter(plain);
  ASSERT_TRUE(d1);
  DFlashParams& p1 = d1->params();
  for (const DFlashParamSpec& s1 : p1.layout.specs)
    for (const DFlashParamSpec& s2 : p2.layout.specs)
      if (s1.name == s2.name)
        std::memcpy(p1.master.view().data_as<float>() + s1.offset,
                    p2.master.view().data_as<float>() + s2.offset, s1.numel() * 4);
  ASSERT_TRUE(p1.SyncCompute(nullptr).ok());
  ASSERT_TRUE(Run(*drafter_, true).ok());
  ASSERT_TRUE(Run(*d1, true).ok());
  EXPECT_NEAR(Loss(*drafter_), Loss(*d1), 2e-3 * std::abs(Loss(*d1)));
  const float* g1 = p1.grads.view().data_as<float>();
  const float* g2 = p2.grads.view().data_as<float>();
  for (const DFlashParamSpec& s1 : p1.layout.specs)
    for (const DFlashParamSpec& s2 : p2.layout.specs) {
      if (s1.name != s2.name) continue;
      double err2 = 0, ref2 = 0;
      for (int64_t i = 0; i < s1.numel(); ++i) {
        const double a = g1[s1.offset + i], b = g2[s2.offset + i];
        ref2 += a * a;
        err2 += (a - b) * (a - b);
      }
      ASSERT_GT(ref2, 0.0) << s1.name;
      EXPECT_LT(std::sqrt(err2 / ref2), 0.03) << s1.name;
    }
}

TEST_F(DFlash2DrafterTest, ForwardMatchesFloat64Reference) {
  ASSERT_TRUE(Run(*drafter_, false).ok());
  testing::RefInputs in;
  double dflash = 0, selector = 0;
  Reference(&in).Loss(ComputeParams(), &dflash, &selector);
  EXPECT_NEAR(Loss(*drafter_), dflash, 1e-2 * std::abs(dflash));
  EXPECT_GT(dflash, 0.5);
  EXPECT_NEAR(SelectorLoss(*drafter_), selector, 2e-2 * std::abs(selector) + 1e-3);
  // Some loss rows have their target among the candidates (else the selector test is
  // vacuous); covered >= correct.
  const int32_t* stats = drafter_->selector_stats().data_as<int32_t>();
  EXPECT_GT(stats[0], 0);
  EXPECT_LE(stats[1], stats[0]);
  EXPECT_GT(selector, 0.0);
}

TEST_F(DFlash2DrafterTest, BackwardMatchesFiniteDifferences) {
  ASSERT_TRUE(Run(*drafter_, true).ok());
  testing::RefInputs in;
  const testing::DFlashReference ref = Reference(&in);
  std::vector<double> p = ComputeParams();
  const DFlashParams& params = drafter_->params();
  const float* grads = params.grads.view().data_as<float>();
  std::mt19937 rng(1);
  for (const DFlashParamSpec& s : params.layout.specs) {
    // The codebooks' gradient lives on the rows of prev and candidate tokens only: sample
    // those rows' entries where the analytic gradient is nonzero, plus random ones.
    std::vector<int64_t> picks;
    for (int64_t i = 0; i < s.numel(); ++i)
      if (grads[s.offset + i] != 0.0f) picks.push_back(i);
    std::shuffle(picks.begin(), picks.end(), rng);
    picks.resize(std::min<size_t>(picks.size(), 6));
    for (int n = 0; n < 2; ++n)
      picks.push_back(std::uniform_int_distribution<int64_t>(0, s.numel() - 1)(rng));
    double err2 = 0, ref2 = 0;
    for (int64_t j : picks) {
      const int64_t i = s.offset + j;
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
    // bf16 activations and activation gradients, through two more bf16 convolutions per
    // branch than DFlash: up to ~6% measured (q_proj); a missing or wrong path is O(1).
    ASSERT_GT(ref2, 0.0) << s.name << ": zero gradient";
    EXPECT_LT(std::sqrt(err2 / ref2), 0.08) << s.name;
  }
}

TEST_F(DFlash2DrafterTest, WorkspaceBytesIsWhatCreateAllocates) {
  DFlashDrafterOptions o{plan_.tokens, 4, 32};
  o.selector_loss_weight = alpha_;
  auto measured = DFlashDrafter::WorkspaceBytes(config_, o, kernels::Device::Cpu());
  ASSERT_TRUE(measured.ok()) << measured.status().ToString();
  EXPECT_EQ(*measured, drafter_->workspace_bytes());
  DFlashConfig plain = config_;
  plain.dflash2.reset();
  auto dflash = DFlashDrafter::WorkspaceBytes(plain, o, kernels::Device::Cpu());
  ASSERT_TRUE(dflash.ok());
  EXPECT_GT(*measured, *dflash);  // the convolutions' activations and the selector's buffers
  // The input embedding scale runs in place: no workspace of its own.
  DFlashConfig scaled = config_;
  scaled.dflash2->input_embedding_scale = 1.5;
  auto with_scale = DFlashDrafter::WorkspaceBytes(scaled, o, kernels::Device::Cpu());
  ASSERT_TRUE(with_scale.ok()) << with_scale.status().ToString();
  EXPECT_EQ(*with_scale, *measured);
  scaled.dflash2->input_embedding_scale = 0.0;
  EXPECT_FALSE(DFlashDrafter::WorkspaceBytes(scaled, o, kernels::Device::Cpu()).ok());
}

// input_embedding_scale s multiplies the block's embeddings before layer 0, each the bf16 of
// the fp32 product: with s = 1.5 the step is bit for bit the unscaled step on the table
// bf16(1.5 * e) (loss, selector loss and every gradient), it differs from the unscaled step
// on the same table, and its loss follows the float64 reference with the scale.
TEST_F(DFlash2DrafterTest, InputEmbeddingScaleIsThePreScaledEmbedding) {
  ASSERT_TRUE(Run(*drafter_, true).ok());
  const float unscaled = Loss(*drafter_);
  DFlashConfig scaled = config_;
  scaled.dflash2->input_embedding_scale = 1.5;
  std::unique_ptr<DFlashDrafter> ds = NewDrafter(scaled);
  ASSERT_TRUE(ds);
  DFlashParams& p = drafter_->params();
  DFlashParams& ps = ds->params();
  std::memcpy(ps.master.view().data(), p.master.view().data(), p.master.view().nbytes());
  ASSERT_TRUE(ps.SyncCompute(nullptr).ok());
  ASSERT_TRUE(Run(*ds, true).ok());
  EXPECT_NE(Loss(*ds), unscaled) << "the scale does not reach the step";
  // The float64 reference with the scale (the bound of ForwardMatchesFloat64Reference).
  testing::RefInputs in;
  Reference(&in);
  in.config = &scaled;
  double dflash = 0, selector = 0;
  testing::DFlashReference(in).Loss(ComputeParams(), &dflash, &selector);
  EXPECT_NEAR(Loss(*ds), dflash, 1e-2 * std::abs(dflash));
  EXPECT_NEAR(SelectorLoss(*ds), selector, 2e-2 * std::abs(selector) + 1e-3);

  const std::vector<bf16> table = embedding_;
  for (bf16& e : embedding_) e = bf16(1.5f * e.f());
  ASSERT_TRUE(Run(*drafter_, true).ok());
  embedding_ = table;
  EXPECT_EQ(Loss(*ds), Loss(*drafter_));
  EXPECT_EQ(SelectorLoss(*ds), SelectorLoss(*drafter_));
  const float* g = p.grads.view().data_as<float>();
  const float* gs = ps.grads.view().data_as<float>();
  for (const DFlashParamSpec& s : p.layout.specs)
    for (int64_t i = 0; i < s.numel(); ++i)
      ASSERT_EQ(gs[s.offset + i], g[s.offset + i]) << s.name << "[" << i << "]";
}

// The selector's teacher-forced previous token comes from the plan's prev_ids, also after a
// slot without loss (a loss-mask hole: the previous slot's target is -1 there). With holes
// at every even slot the selector loss follows the reference, and differs from the same
// plan without prev_ids (whose rows after a hole get no pair term).
TEST_F(DFlash2DrafterTest, PrevIdsAfterALossMaskHoleReachTheSelector) {
  config_.dflash2->selector_top_k = 64;  // most rows covered: rows after a hole count
  drafter_ = NewDrafter(config_);
  ASSERT_TRUE(drafter_);
  testing::RandomizeDFlash2Params(drafter_->params(), 3);
  const int64_t bs = plan_.block_size;
  for (size_t i = 0; i < plan_.targets.size(); ++i)
    if (i % bs >= 2 && i % bs % 2 == 0) {
      plan_.targets[i] = -1;
      plan_.weights[i] = 0.0f;
    }
  ASSERT_FALSE(plan_.prev_ids.empty());
  ASSERT_TRUE(drafter_->SetPlan(plan_).ok());
  ASSERT_TRUE(Run(*drafter_, false).ok());
  const float with_prev = SelectorLoss(*drafter_), dflash_loss = Loss(*drafter_);
  ASSERT_GT(drafter_->selector_stats().data_as<int32_t>()[0], 0) << "no covered row";
  testing::RefInputs in;
  double dflash = 0, selector = 0;
  Reference(&in).Loss(ComputeParams(), &dflash, &selector);
  EXPECT_NEAR(with_prev, selector, 2e-2 * std::abs(selector) + 1e-3);
  EXPECT_NEAR(Loss(*drafter_), dflash, 1e-2 * std::abs(dflash));

  DFlashBlockPlan fallback = plan_;
  fallback.prev_ids.clear();
  ASSERT_TRUE(drafter_->SetPlan(fallback).ok());
  ASSERT_TRUE(Run(*drafter_, false).ok());
  EXPECT_NE(SelectorLoss(*drafter_), with_prev);
  EXPECT_EQ(Loss(*drafter_), dflash_loss);  // the DFlash loss does not read prev
}

TEST_F(DFlash2DrafterTest, TotalLossFallsUnderAdamW) {
  kernels::AdamWConfig cfg;
  cfg.lr = 3e-3f;
  float first = 0, last = 0;
  for (int step = 0; step < 25; ++step) {
    ASSERT_TRUE(Run(*drafter_, true).ok());
    const float total = Loss(*drafter_) + alpha_ * SelectorLoss(*drafter_);
    if (step == 0) first = total;
    last = total;
    ASSERT_TRUE(drafter_->OptimizerStep(cfg, 1.0f).ok());
  }
  EXPECT_LT(last, 0.5f * first) << first << " -> " << last;
}

}  // namespace
}  // namespace tandem::models
