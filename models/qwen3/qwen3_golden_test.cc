// The Qwen3 target on the CPU against HF transformers goldens (tests/golden/qwen3_tiny* and
// the Qwen3-MoE tests/golden/qwen3_moe_tiny*, with router agreement). SKIPPED, with the
// command that makes them, until they are generated.
#include <gtest/gtest.h>

#include "models/qwen3/qwen3_golden_util.h"

namespace tandem::models {
namespace {

TEST(Qwen3GoldenTest, CpuMatchesTransformers) {
  if (!testing::HaveQwen3Golden()) GTEST_SKIP() << testing::kNoGoldenMessage;
  testing::CheckQwen3Golden(kernels::Device::Cpu(), nullptr);
}

TEST(Qwen3GoldenTest, MoeCpuMatchesTransformers) {
  const testing::GoldenSet g = testing::Qwen3MoeGolden();
  if (!testing::HaveGolden(g)) GTEST_SKIP() << g.missing;
  testing::CheckQwen3Golden(kernels::Device::Cpu(), nullptr, g);
}

}  // namespace
}  // namespace tandem::models
