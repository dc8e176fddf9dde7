// CPU tests of the Qwen3 target with precision = "fp8" (the FP8 reference kernels): on a
// tiny random checkpoint the fp8 forward stays close to the bf16 one (but is not it), with a
// token count that is not a multiple of 4 (padded FP8 rows); the projections' memory
// shrinks; a bad precision name is refused.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "models/io/model_test_util.h"
#include "models/qwen3/qwen3_target.h"
#include "models/qwen3/qwen3_test_util.h"

namespace tandem::models {
namespace {

using kernels::bf16;
using kernels::DType;
using kernels::TensorView;

std::vector<std::vector<bf16>> RunCaptures(Qwen3Target& target, testing::HostBatch& b) {
  const int64_t t = static_cast<int64_t>(b.ids.size()), h = target.config().hidden_size;
  std::vector<std::vector<bf16>> hidden(3, std::vector<bf16>(t * h));
  std::vector<LayerCapture> caps;
  for (int l = 0; l < 3; ++l) caps.push_back({l, TensorView(hidden[l].data(), DType::kBF16, {t, h})});
  PackedBatch pb{TensorView(b.ids.data(), DType::kI32, {t}),
                 TensorView(b.pos.data(), DType::kI32, {t}),
                 TensorView(b.cu.data(), DType::kI32, {static_cast<int64_t>(b.cu.size())}),
                 b.max_seqlen};
  Status st = target.Forward(pb, caps);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return hidden;
}

TEST(Qwen3Fp8Test, Fp8ForwardTracksBf16) {
  const TransformerConfig cfg = testing::TinyConfig(false, false);
  const testing::HostWeights w = testing::RandomHostWeights(cfg, 11);
  testing::ScratchDir dir;
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), cfg, w).ok());
  auto bf = Qwen3Target::Load(dir.path(), kernels::Device::Cpu(), {.max_tokens = 40});
  auto f8 = Qwen3Target::Load(dir.path(), kernels::Device::Cpu(),
                              {.max_tokens = 40, .precision = TargetPrecision::kFp8});
  ASSERT_TRUE(bf.ok()) << bf.status().ToString();
  ASSERT_TRUE(f8.ok()) << f8.status().ToString();
  EXPECT_LT((*f8)->weight_bytes(), (*bf)->weight_bytes());
  EXPECT_FALSE((*f8)->weights().has_projections());
  testing::HostBatch b = testing::MakeBatch({5, 11, 1, 6}, cfg.vocab_size, 3);  // 23 tokens
  const auto want = RunCaptures(**bf, b);
  const auto got = RunCaptures(**f8, b);
  const int64_t h = cfg.hidden_size, t = static_cast<int64_t>(b.ids.size());
  for (int l = 0; l < 3; ++l) {
    double err = 0, ref = 0, min_cos = 1;
    for (int64_t r = 0; r < t; ++r) {
      double dot = 0, gg = 0, ww = 0;
      for (int64_t c = 0; c < h; ++c) {
        const double g = got[l][r * h + c].f(), x = want[l][r * h + c].f();
        dot += g * x, gg += g * g, ww += x * x, err += (g - x) * (g - x), ref += x * x;
      }
      min_cos = std::min(min_cos, dot / std::sqrt(gg * ww));
    }
    const double rel = std::sqrt(err / ref);
    // e4m3 keeps 3 mantissa bits (2^-4 relative per element, averaging down over K); over
    // three layers the captures stay within a few percent of bf16. A forward that ignored
    // the fp8 path would give rel == 0.
    EXPECT_GT(rel, 1e-4) << "layer " << l;
    EXPECT_LT(rel, 0.08) << "layer " << l;
    EXPECT_GT(min_cos, 0.99) << "layer " << l;
  }
}

TEST(Qwen3Fp8Test, RejectsUnknownPrecision) {
  EXPECT_FALSE(ParseTargetPrecision("fp4").ok());
  EXPECT_EQ(*ParseTargetPrecision("fp8"), TargetPrecision::kFp8);
}

}  // namespace
}  // namespace tandem::models
