// CPU tests of hybrid decoding (Qwen35Target::Extend, Qwen35Cache) on a tiny random Qwen3.5
// (the committed tiny config: 6 Gated DeltaNet + 2 gated-attention layers): a prefill, a fully
// rejected block, a partly accepted block (DeltaNet replay, conv rollback) and the rest give
// bitwise the logits and features of a one-shot prefill of the accepted sequence; the cached
// forward agrees with the packed Forward (float64 delta rule) to bf16 rounding; rollback
// limits and argument errors. With precision = "fp8" (e4m3 projections, reference FP8
// GEMMs) the rollback is bitwise too: activations are quantized per token, so a row's codes
// do not depend on what else is in the batch; and so it is with the mixture-of-experts
// hybrid's MoE blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "models/qwen3_5/qwen3_5_moe_test_util.h"
#include "models/qwen3_5/qwen3_5_target.h"
#include "models/qwen3_5/qwen3_5_test_util.h"

namespace tandem::models {
namespace {

using kernels::bf16;
using kernels::Device;
using kernels::DType;
using kernels::TensorView;

constexpr int kLinearLayer = 4;  // a Gated DeltaNet layer of the tiny config
constexpr int kLastLayer = 7;    // full attention

class Qwen35CacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = Config();
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    cfg_ = *config;
    ASSERT_EQ(cfg_.layer_types[kLinearLayer], HybridLayerType::kLinearAttention);
    auto w = Qwen35Weights::Random(cfg_, kernels::HostAllocator(), 11, nullptr);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    auto t = Qwen35Target::Create(std::move(w).value(),
                                  {.max_tokens = 32, .precision = precision()});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    target_ = std::move(*t);
  }

  virtual TargetPrecision precision() const { return TargetPrecision::kBf16; }
  // The tiny golden model's config (8 layers: 4 is Gated DeltaNet, 7 full attention).
  virtual Result<Qwen35Config> Config() const { return LoadQwen35Config(testing::kDir); }

  Qwen35Cache NewCache(int64_t capacity, int64_t max_block) {
    auto c = Qwen35Cache::Create(cfg_, capacity, max_block, kernels::HostAllocator());
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(c).value();
  }

  // Logits (f32) and the features of a DeltaNet layer and the last layer of `ids` appended
  // to `cache`.
  void Extend(Qwen35Cache& cache, const std::vector<int32_t>& ids, std::vector<float>* logits,
              std::vector<float>* feat) {
    const int64_t b = static_cast<int64_t>(ids.size()), h = cfg_.hidden_size;
    logits->assign(b * cfg_.vocab_size, 0.f);
    std::vector<bf16> f(2 * b * h);
    const HybridCapture caps[] = {{kLinearLayer, TensorView(f.data(), DType::kBF16, {b, h})},
                                  {kLastLayer, TensorView(f.data() + b * h, DType::kBF16, {b, h})}};
    const Status st = target_->Extend(
        cache, ids, caps, TensorView(logits->data(), DType::kF32, {b, cfg_.vocab_size}));
    ASSERT_TRUE(st.ok()) << st.ToString();
    feat->clear();
    for (bf16 x : f) feat->push_back(x.f());
  }

  // Rows [from, from + n) of a [rows, width] block.
  static std::vector<float> Rows(const std::vector<float>& v, int64_t width, int64_t from,
                                 int64_t n) {
    return std::vector<float>(v.begin() + from * width, v.begin() + (from + n) * width);
  }
  // The features of rows [from, from + n) of both captured layers (Extend's layout).
  std::vector<float> Feat(const std::vector<float>& f, int64_t rows, int64_t from, int64_t n) {
    const int64_t h = cfg_.hidden_size;
    std::vector<float> a = Rows(f, h, from, n), b = Rows(f, h, rows + from, n);
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  static double MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
    return m;
  }

  std::vector<int32_t> Ids(int n, int seed) const {
    std::vector<int32_t> v;
    for (int i = 0; i < n; ++i) v.push_back((seed * 131 + i * 37 + i * i * 7) % cfg_.vocab_size);
    return v;
  }

  void CheckRolledBackCacheMatchesFreshPrefill();

  Qwen35Config cfg_;
  std::unique_ptr<Qwen35Target> target_;
};

class Qwen35Fp8CacheTest : public Qwen35CacheTest {
 protected:
  TargetPrecision precision() const override { return TargetPrecision::kFp8; }
};

// The mixture-of-experts hybrid (the tiny MoE config with 8 layers): Extend runs its MoE
// blocks on each block of tokens, and every token's routing and experts depend on that token
// alone, so rollback gives the fresh prefill bit for bit too.
class Qwen35MoeCacheTest : public Qwen35CacheTest {
 protected:
  Result<Qwen35Config> Config() const override {
    nlohmann::json j = testing::TinyMoeText();
    j["num_hidden_layers"] = 8;
    return ParseQwen35Config(j, "tiny moe config");
  }
};

TEST_F(Qwen35MoeCacheTest, RolledBackCacheMatchesFreshPrefillBitwise) {
  ASSERT_TRUE(cfg_.moe.has_value());
  CheckRolledBackCacheMatchesFreshPrefill();
}

TEST_F(Qwen35CacheTest, RolledBackCacheMatchesFreshPrefillBitwise) {
  CheckRolledBackCacheMatchesFreshPrefill();
}

TEST_F(Qwen35Fp8CacheTest, RolledBackCacheMatchesFreshPrefillBitwise) {
  ASSERT_FALSE(target_->fp8_projections().layers().empty());
  CheckRolledBackCacheMatchesFreshPrefill();
}

void Qwen35CacheTest::CheckRolledBackCacheMatchesFreshPrefill() {
  const std::vector<int32_t> seq = Ids(13, 1), junk = Ids(6, 2);
  const std::vector<int32_t> prompt(seq.begin(), seq.begin() + 7), rest(seq.begin() + 7, seq.end());
  const int64_t v = cfg_.vocab_size;
  std::vector<float> full_logits, full_feat, logits, feat;
  Qwen35Cache fresh = NewCache(16, 8);
  Extend(fresh, seq, &full_logits, &full_feat);

  Qwen35Cache cache = NewCache(20, 8);
  Extend(cache, prompt, &logits, &feat);  // prefill
  EXPECT_EQ(logits, Rows(full_logits, v, 0, 7));
  // A fully rejected block (accept 0: back to the snapshot, the conv state of the start).
  Extend(cache, junk, &logits, &feat);
  ASSERT_TRUE(cache.Crop(7).ok());
  // Three accepted tokens then two rejected; cropped in two steps (each replays from the
  // block-start snapshot).
  const std::vector<int32_t> block = {rest[0], rest[1], rest[2], junk[0], junk[1]};
  Extend(cache, block, &logits, &feat);
  ASSERT_EQ(cache.length(), 12);
  EXPECT_EQ(cache.rollback_floor(), 7);
  ASSERT_TRUE(cache.Crop(11).ok());
  ASSERT_TRUE(cache.Crop(10).ok());
  EXPECT_EQ(Rows(logits, v, 0, 3), Rows(full_logits, v, 7, 3));
  const std::vector<int32_t> tail(rest.begin() + 3, rest.end());
  Extend(cache, tail, &logits, &feat);
  EXPECT_EQ(cache.length(), 13);
  // Exact: the conv and delta-rule steps are pure functions of (state, token), the state is
  // stored in fp32 after every token whatever the split, the cached attention does the packed
  // reference's arithmetic in the same order, and the CPU GEMMs compute each row alone.
  EXPECT_EQ(logits, Rows(full_logits, v, 10, 3));
  EXPECT_EQ(feat, Feat(full_feat, 13, 10, 3));

  // Sensitivity: without the crops the junk stays in the state and the logits move away.
  Qwen35Cache stale = NewCache(32, 8);
  Extend(stale, prompt, &logits, &feat);
  Extend(stale, junk, &logits, &feat);
  Extend(stale, rest, &logits, &feat);
  EXPECT_GT(MaxDiff(logits, Rows(full_logits, v, 7, 6)), 1e-2);
  // Reset: a second sequence in the same cache starts from zero state.
  ASSERT_TRUE(cache.Reset().ok());
  Extend(cache, seq, &logits, &feat);
  EXPECT_EQ(logits, full_logits);
}

TEST_F(Qwen35CacheTest, CachedForwardAgreesWithThePackedForward) {
  const std::vector<int32_t> seq = Ids(21, 3);
  const int64_t t = 21, h = cfg_.hidden_size;
  std::vector<float> logits, feat;
  Qwen35Cache cache = NewCache(32, 4);
  Extend(cache, std::vector<int32_t>(seq.begin(), seq.begin() + 9), &logits, &feat);
  std::vector<float> cached = Feat(feat, 9, 0, 9);
  for (int64_t at = 9; at < t; at += 4) {  // 3 verify-sized steps of 4
    Extend(cache, std::vector<int32_t>(seq.begin() + at, seq.begin() + at + 4), &logits, &feat);
    std::vector<float> f = Feat(feat, 4, 0, 4);
    cached.insert(cached.end(), f.begin(), f.end());
  }
  // The packed forward (float64 delta rule, never rounding its state) over one document.
  std::vector<int32_t> ids = seq, pos(t), cu = {0, static_cast<int32_t>(t)};
  for (int64_t i = 0; i < t; ++i) pos[i] = static_cast<int32_t>(i);
  std::vector<bf16> out(2 * t * h);
  const HybridCapture caps[] = {{kLinearLayer, TensorView(out.data(), DType::kBF16, {t, h})},
                                {kLastLayer, TensorView(out.data() + t * h, DType::kBF16, {t, h})}};
  const HybridBatch batch{TensorView(ids.data(), DType::kI32, {t}),
                          TensorView(pos.data(), DType::kI32, {t}),
                          TensorView(cu.data(), DType::kI32, {2}), 0};
  ASSERT_TRUE(target_->Forward(batch, caps).ok());
  // Cached layout: per step [linear rows; last rows]; rebuild the packed layout per layer.
  std::vector<float> lin, last;
  int64_t at = 0;
  for (int64_t n : {9, 4, 4, 4}) {
    lin.insert(lin.end(), cached.begin() + at * h, cached.begin() + (at + n) * h);
    last.insert(last.end(), cached.begin() + (at + n) * h, cached.begin() + (at + 2 * n) * h);
    at += 2 * n;
  }
  double scale = 0, diff = 0;
  for (int64_t i = 0; i < t * h; ++i) {
    scale = std::max(scale, std::fabs(double(out[t * h + i].f())));
    diff = std::max(diff, std::fabs(double(out[i].f()) - lin[i]));
    diff = std::max(diff, std::fabs(double(out[t * h + i].f()) - last[i]));
  }
  // The two differ only by the fp32 rounding of the delta-rule state between tokens, which
  // can flip a bf16 rounding here and there: a few bf16 ulps of the largest value at most.
  EXPECT_GT(scale, 0.1);
  EXPECT_LE(diff, 4 * scale / 128) << "scale " << scale;
  RecordProperty("max_abs_diff", std::to_string(diff));
  std::cout << "cached vs packed forward: max |diff| " << diff << ", max |x| " << scale << "\n";
}

TEST_F(Qwen35CacheTest, RollbackLimitsAndBadArguments) {
  std::vector<float> logits, feat;
  Qwen35Cache cache = NewCache(24, 4);
  Extend(cache, Ids(6, 4), &logits, &feat);  // longer than max_block: no rollback data
  EXPECT_EQ(cache.rollback_floor(), 6);
  Status s = cache.Crop(5);
  EXPECT_NE(s.ToString().find("length 5 not in [6, 6]"), std::string::npos) << s.ToString();
  Extend(cache, Ids(3, 5), &logits, &feat);
  EXPECT_TRUE(cache.Crop(7).ok());
  s = cache.Crop(8);
  EXPECT_NE(s.ToString().find("not in [6, 7]"), std::string::npos) << s.ToString();

  const std::vector<int32_t> bad = {1, static_cast<int32_t>(cfg_.vocab_size)};
  s = target_->Extend(cache, bad, {});
  EXPECT_NE(s.ToString().find("token 1 is id 512"), std::string::npos) << s.ToString();
  s = target_->Extend(cache, Ids(18, 6), {});
  EXPECT_NE(s.ToString().find("exceed the cache's capacity 24"), std::string::npos) << s.ToString();
  EXPECT_FALSE(target_->Extend(cache, std::vector<int32_t>{}, {}).ok());
  EXPECT_EQ(cache.length(), 7);
  std::vector<float> small(3);
  s = target_->Extend(cache, Ids(1, 7), {}, TensorView(small.data(), DType::kF32, {1, 3}));
  EXPECT_NE(s.ToString().find("logits must be"), std::string::npos) << s.ToString();

  Qwen35Config other = cfg_;
  other.linear_num_value_heads = 2;
  auto wrong = Qwen35Cache::Create(other, 8, 4, kernels::HostAllocator());
  ASSERT_TRUE(wrong.ok());
  s = target_->Extend(*wrong, Ids(2, 8), {});
  EXPECT_NE(s.ToString().find("made for 8 layers"), std::string::npos) << s.ToString();
  EXPECT_FALSE(Qwen35Cache::Create(cfg_, 0, 4, kernels::HostAllocator()).ok());
  EXPECT_FALSE(Qwen35Cache::Create(cfg_, 8, 0, kernels::HostAllocator()).ok());
}

}  // namespace
}  // namespace tandem::models
