// CPU tests of KV-cache decoding (Qwen3Target::Extend, Qwen3KvCache): a prefill plus a
// verified-then-cropped block gives the same logits and captured features as a fresh
// forward over the accepted sequence; argument errors. In bf16 and fp8 (activations are
// quantized per token, so the FP8 results are exact too).
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "models/io/model_test_util.h"
#include "models/qwen3/qwen3_target.h"
#include "models/qwen3/qwen3_test_util.h"

namespace tandem::models {
namespace {

using kernels::bf16;
using kernels::Device;
using kernels::DType;
using kernels::TensorView;

// Params: llama (else qwen3), and the target's precision.
class Qwen3KvCacheTest : public ::testing::TestWithParam<std::tuple<bool, TargetPrecision>> {
 protected:
  void SetUp() override {
    cfg_ = testing::TinyConfig(std::get<0>(GetParam()), false);
    ASSERT_TRUE(
        testing::WriteCheckpoint(dir_.path(), cfg_, testing::RandomHostWeights(cfg_, 3)).ok());
    auto t = Qwen3Target::Load(dir_.path(), kernels::HostAllocator(),
                               {.max_tokens = 32, .precision = std::get<1>(GetParam())});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    target_ = std::move(*t);
  }

  // Logits (f32) and layer-1 features (as float) of `ids` appended to `cache`.
  void Extend(Qwen3KvCache& cache, const std::vector<int32_t>& ids, std::vector<float>* logits,
              std::vector<float>* feat) {
    const int64_t b = static_cast<int64_t>(ids.size());
    logits->assign(b * cfg_.vocab_size, 0.f);
    std::vector<bf16> f(b * cfg_.hidden_size);
    const LayerCapture cap[] = {{1, TensorView(f.data(), DType::kBF16, {b, cfg_.hidden_size})}};
    ASSERT_TRUE(target_
                    ->Extend(cache, ids, cap,
                             TensorView(logits->data(), DType::kF32, {b, cfg_.vocab_size}))
                    .ok());
    feat->clear();
    for (bf16 x : f) feat->push_back(x.f());
  }

  // The same through Forward over the whole sequence as one document.
  void Fresh(const std::vector<int32_t>& ids, std::vector<float>* logits,
             std::vector<float>* feat) {
    const int64_t t = static_cast<int64_t>(ids.size());
    std::vector<int32_t> ids_copy = ids, pos(t), cu = {0, static_cast<int32_t>(t)};
    for (int64_t i = 0; i < t; ++i) pos[i] = static_cast<int32_t>(i);
    logits->assign(t * cfg_.vocab_size, 0.f);
    std::vector<bf16> f(t * cfg_.hidden_size);
    const LayerCapture cap[] = {{1, TensorView(f.data(), DType::kBF16, {t, cfg_.hidden_size})}};
    const PackedBatch batch{TensorView(ids_copy.data(), DType::kI32, {t}),
                            TensorView(pos.data(), DType::kI32, {t}),
                            TensorView(cu.data(), DType::kI32, {2}), static_cast<int>(t)};
    ASSERT_TRUE(
        target_->Forward(batch, cap, TensorView(logits->data(), DType::kF32, {t, cfg_.vocab_size}))
            .ok());
    feat->clear();
    for (bf16 x : f) feat->push_back(x.f());
  }

  static double MaxDiff(const std::vector<float>& a, const std::vector<float>& b, size_t off) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[off + i]));
    return m;
  }

  TransformerConfig cfg_;
  testing::ScratchDir dir_;
  std::unique_ptr<Qwen3Target> target_;
};

TEST_P(Qwen3KvCacheTest, CroppedCacheMatchesFreshPrefill) {
  const testing::HostBatch seq = testing::MakeBatch({13}, cfg_.vocab_size, 21);
  const testing::HostBatch junk = testing::MakeBatch({6}, cfg_.vocab_size, 22);
  const std::vector<int32_t> prompt(seq.ids.begin(), seq.ids.begin() + 7);
  const std::vector<int32_t> rest(seq.ids.begin() + 7, seq.ids.end());
  std::vector<float> full_logits, full_feat, logits, feat;
  Fresh(seq.ids, &full_logits, &full_feat);

  auto cache = Qwen3KvCache::Create(cfg_, 20, kernels::HostAllocator());
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  Extend(*cache, prompt, &logits, &feat);  // prefill
  EXPECT_EQ(MaxDiff(logits, full_logits, 0), 0.0);
  EXPECT_EQ(MaxDiff(feat, full_feat, 0), 0.0);
  // A rejected block (junk tokens, accepted length 0), then the real continuation in two
  // verify steps with a partial rejection in between.
  Extend(*cache, junk.ids, &logits, &feat);
  ASSERT_TRUE(cache->Crop(7).ok());
  std::vector<int32_t> block = {rest[0], rest[1], rest[2], junk.ids[0], junk.ids[1]};
  Extend(*cache, block, &logits, &feat);
  ASSERT_EQ(cache->length(), 12);
  ASSERT_TRUE(cache->Crop(10).ok());  // accepted 3
  // Rows of the accepted tokens of that block already equal the fresh ones.
  EXPECT_EQ(MaxDiff(std::vector<float>(logits.begin(), logits.begin() + 3 * cfg_.vocab_size),
                    full_logits, 7 * cfg_.vocab_size), 0.0);
  const std::vector<int32_t> tail(rest.begin() + 3, rest.end());
  Extend(*cache, tail, &logits, &feat);
  EXPECT_EQ(cache->length(), 13);
  // Exact: the cached attention and the packed one do the same fp32 arithmetic in the same
  // order, and the CPU GEMMs compute each row independently of the others.
  EXPECT_EQ(MaxDiff(logits, full_logits, 10 * cfg_.vocab_size), 0.0);
  EXPECT_EQ(MaxDiff(feat, full_feat, 10 * cfg_.hidden_size), 0.0);

  // Sensitivity: without the crop the junk stays visible and the logits move far away.
  auto stale = Qwen3KvCache::Create(cfg_, 30, kernels::HostAllocator());
  ASSERT_TRUE(stale.ok());
  Extend(*stale, prompt, &logits, &feat);
  Extend(*stale, junk.ids, &logits, &feat);
  Extend(*stale, rest, &logits, &feat);
  EXPECT_GT(MaxDiff(logits, full_logits, 7 * cfg_.vocab_size), 1e-2);
}

TEST_P(Qwen3KvCacheTest, RejectsBadArguments) {
  auto cache = Qwen3KvCache::Create(cfg_, 4, kernels::HostAllocator());
  ASSERT_TRUE(cache.ok());
  const std::vector<int32_t> five = {1, 2, 3, 4, 5}, bad = {1, int32_t(cfg_.vocab_size)};
  Status s = target_->Extend(*cache, five, {});
  EXPECT_NE(s.ToString().find("capacity 4"), std::string::npos) << s.ToString();
  s = target_->Extend(*cache, bad, {});
  EXPECT_NE(s.ToString().find("not in [0, 67)"), std::string::npos) << s.ToString();
  EXPECT_EQ(cache->length(), 0);
  s = cache->Crop(1);
  EXPECT_NE(s.ToString().find("not in [0, 0]"), std::string::npos) << s.ToString();
  EXPECT_FALSE(target_->Extend(*cache, std::vector<int32_t>{}, {}).ok());
  EXPECT_FALSE(Qwen3KvCache::Create(cfg_, 0, kernels::HostAllocator()).ok());
  TransformerConfig other = cfg_;
  other.num_hidden_layers = 2;
  auto wrong = Qwen3KvCache::Create(other, 8, kernels::HostAllocator());
  ASSERT_TRUE(wrong.ok());
  s = target_->Extend(*wrong, five, {});
  EXPECT_NE(s.ToString().find("does not fit"), std::string::npos) << s.ToString();
}

// ExtendBatch over three sequences with different pasts and block lengths gives, row for
// row, the logits and features of an Extend of each sequence alone; the caches grow per
// sequence and crop independently.
TEST_P(Qwen3KvCacheTest, ExtendBatchMatchesExtendPerSequence) {
  const std::vector<int64_t> prompt_len = {5, 9, 2}, block_len = {3, 1, 4};
  auto alone = Qwen3BatchKvCache::Create(cfg_, 3, 20, kernels::HostAllocator());
  auto batched = Qwen3BatchKvCache::Create(cfg_, 3, 20, kernels::HostAllocator());
  ASSERT_TRUE(alone.ok() && batched.ok());
  std::vector<std::vector<int32_t>> blocks;
  std::vector<float> want_logits, want_feat, logits, feat;
  for (int64_t s = 0; s < 3; ++s) {
    const testing::HostBatch seq = testing::MakeBatch({int(prompt_len[s] + block_len[s])},
                                                      cfg_.vocab_size, 40 + uint32_t(s));
    const std::vector<int32_t> prompt(seq.ids.begin(), seq.ids.begin() + prompt_len[s]);
    blocks.emplace_back(seq.ids.begin() + prompt_len[s], seq.ids.end());
    Extend(alone->sequence(s), prompt, &logits, &feat);
    Extend(batched->sequence(s), prompt, &logits, &feat);
    Extend(alone->sequence(s), blocks.back(), &logits, &feat);
    want_logits.insert(want_logits.end(), logits.begin(), logits.end());
    want_feat.insert(want_feat.end(), feat.begin(), feat.end());
  }
  // Rows packed in the order 2, 0, 1.
  const std::vector<BatchExtendPart> parts = {{2, blocks[2]}, {0, blocks[0]}, {1, blocks[1]}};
  const int64_t rows = 8, v = cfg_.vocab_size, h = cfg_.hidden_size;
  std::vector<float> got(rows * v);
  std::vector<bf16> f(rows * h);
  const LayerCapture cap[] = {{1, TensorView(f.data(), DType::kBF16, {rows, h})}};
  ASSERT_TRUE(target_->ExtendBatch(*batched, parts, cap, TensorView(got.data(), DType::kF32,
                                                                     {rows, v}))
                  .ok());
  const int64_t want_row[] = {0, 3, 4}, got_row[] = {4, 7, 0};  // per sequence
  for (int64_t s = 0; s < 3; ++s) {
    EXPECT_EQ(batched->sequence(s).length(), prompt_len[s] + block_len[s]);
    for (int64_t r = 0; r < block_len[s]; ++r) {
      for (int64_t i = 0; i < v; ++i)
        ASSERT_EQ(got[(got_row[s] + r) * v + i], want_logits[(want_row[s] + r) * v + i])
            << "sequence " << s << " row " << r;
      for (int64_t i = 0; i < h; ++i)
        ASSERT_EQ(f[(got_row[s] + r) * h + i].f(), want_feat[(want_row[s] + r) * h + i]);
    }
  }
  // Sensitivity: a sequence verified against another's cache gives other logits.
  auto swapped = Qwen3BatchKvCache::Create(cfg_, 3, 20, kernels::HostAllocator());
  ASSERT_TRUE(swapped.ok());
  std::vector<float> other(block_len[0] * v);
  Extend(swapped->sequence(1), std::vector<int32_t>(5, 3), &logits, &feat);
  const BatchExtendPart wrong[] = {{1, blocks[0]}};
  ASSERT_TRUE(target_->ExtendBatch(*swapped, wrong, {}, TensorView(other.data(), DType::kF32,
                                                                    {block_len[0], v}))
                  .ok());
  EXPECT_GT(MaxDiff(other, want_logits, 0), 1e-3);
  // Errors: a repeated sequence, one out of range, capacity, nothing to do.
  const BatchExtendPart twice[] = {{0, blocks[0]}, {0, blocks[1]}};
  Status st = target_->ExtendBatch(*batched, twice, {});
  EXPECT_NE(st.ToString().find("or repeated"), std::string::npos) << st.ToString();
  const BatchExtendPart outside[] = {{3, blocks[0]}};
  EXPECT_FALSE(target_->ExtendBatch(*batched, outside, {}).ok());
  const std::vector<int32_t> many(15, 1);
  const BatchExtendPart full[] = {{1, many}};
  st = target_->ExtendBatch(*batched, full, {});
  EXPECT_NE(st.ToString().find("sequence 1"), std::string::npos) << st.ToString();
  EXPECT_NE(st.ToString().find("capacity 20"), std::string::npos) << st.ToString();
  EXPECT_FALSE(target_->ExtendBatch(*batched, {}, {}).ok());
  EXPECT_FALSE(Qwen3BatchKvCache::Create(cfg_, 0, 20, kernels::HostAllocator()).ok());
}

INSTANTIATE_TEST_SUITE_P(
    Families, Qwen3KvCacheTest,
    ::testing::Combine(::testing::Values(false, true),
                       ::testing::Values(TargetPrecision::kBf16, TargetPrecision::kFp8)),
    [](const auto& info) {
      return std::string(std::get<0>(info.param) ? "llama_" : "qwen3_") +
             std::string(TargetPrecisionName(std::get<1>(info.param)));
    });

}  // namespace
}  // namespace tandem::models
