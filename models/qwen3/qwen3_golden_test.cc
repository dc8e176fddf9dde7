// The Qwen3 target on the CPU against HF transformers goldens (tests/golden/qwen3_tiny*).
// SKIPPED, with the command that makes them, until they are generated.
#include <gtest/gtest.h>

#include "models/qwen3/qwen3_golden_util.h"

namespace tandem::models {
namespace {

TEST(Qwen3GoldenTest, CpuMatchesTransformers) {
  if (!testing::HaveQwen3Golden()) GTEST_SKIP() << testing::kNoGoldenMessage;
  testing::CheckQwen3Golden(kernels::Device::Cpu(), nullptr);
}

}  // namespace
}  // namespace tandem::models
