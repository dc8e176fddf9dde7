// DFlash speculative decoding against the PyTorch reference loop
// (tests/golden/make_dflash_decode_golden.py): on the same target, drafter and prompts,
// tandem's accept-length sequence and generated tokens are identical, greedy, on the CPU.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "models/dflash/dflash_checkpoint.h"
#include "models/io/safetensors.h"
#include "models/speculative/dflash_decoder.h"

namespace tandem::models {
namespace {

const std::string kDir = std::string(TANDEM_SOURCE_DIR) + "/tests/golden/";
const std::string kGolden = kDir + "dflash_decode_tiny_golden.safetensors";
// A decision closer than this (in logits) to flipping may go either way between bf16 and
// fp32 arithmetic: the drafter's logits here reach ~25 and bf16 rounds at 2^-8 relative, so
// noise of ~0.1 is expected (a step with margin 0.058 was seen to flip).
constexpr float kTieMargin = 0.1f;

template <typename T>
std::vector<T> Read(const SafetensorsReader& r, const std::string& name, kernels::DType dt) {
  const TensorInfo* t = r.Find(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  std::vector<T> out(t->numel());
  EXPECT_TRUE(r.Read(*t, dt, out.data(), t->numel() * 4).ok()) << name;
  return out;
}

std::vector<int32_t> ReadI32(const SafetensorsReader& r, const std::string& name) {
  const TensorInfo* t = r.Find(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  std::vector<int32_t> out(t->numel());
  EXPECT_TRUE(r.Read(*t, kernels::DType::kI32, out.data(), t->numel() * 4).ok()) << name;
  return out;
}

TEST(DFlashDecodeGoldenTest, AcceptLengthsAndTokensMatchPyTorch) {
  if (!std::filesystem::exists(kGolden))
    GTEST_SKIP() << kGolden << " is missing: run python3 "
                 "tests/golden/make_dflash_decode_golden.py (torch + transformers)";
  auto reader = SafetensorsReader::Open(kGolden);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  const SafetensorsReader& r = *reader;
  ASSERT_EQ(r.metadata().at("format"), "tandem-golden");
  ASSERT_EQ(r.metadata().at("version"), "1");
  const int64_t block = std::stoll(r.metadata().at("block_size"));
  const int64_t max_new = std::stoll(r.metadata().at("max_new_tokens"));
  const int prompts = std::stoi(r.metadata().at("prompts"));
  const std::string target_dir = kDir + "dflash_decode_tiny/target";
  const std::string drafter_dir = kDir + "dflash_decode_tiny/drafter";
  const int64_t max_context = 128;

  auto target = Qwen3Target::Load(target_dir, kernels::HostAllocator(), {.max_tokens = 64});
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  auto config = LoadDFlashConfig(drafter_dir);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto drafter = DFlashDrafter::Create(*config, {.max_tokens = max_context, .num_blocks = 1},
                                       kernels::HostAllocator(), nullptr);
  ASSERT_TRUE(drafter.ok()) << drafter.status().ToString();
  ASSERT_TRUE(LoadDFlashWeights(drafter_dir, **drafter).ok());
  auto decoder = DFlashDecoder::Create(target->get(), drafter->get(), max_context);
  ASSERT_TRUE(decoder.ok()) << decoder.status().ToString();

  SpecDecodeOptions o;
  o.max_new_tokens = max_new;
  o.block_size = block;
  int64_t steps = 0, compared = 0, accepted = 0;
  for (int i = 0; i < prompts; ++i) {
    const std::vector<int32_t> prompt = ReadI32(r, fmt::format("prompt.{}", i));
    auto got = (*decoder)->Generate(prompt, o);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    // Greedy speculative decoding returns the target's own tokens (margins > 30 here).
    EXPECT_EQ(got->tokens, ReadI32(r, fmt::format("tokens.{}", i))) << "prompt " << i;
    const std::vector<int32_t> want = ReadI32(r, fmt::format("accept.{}", i));
    const std::vector<float> margin =
        Read<float>(r, fmt::format("margin.{}", i), kernels::DType::kF32);
    ASSERT_EQ(margin.size(), want.size());
    // Accept lengths step by step up to the first decision within rounding noise of a tie
    // (bf16 activations here, fp32 there); after it the runs verify different blocks.
    for (size_t s = 0; s < want.size() && s < got->accept_lengths.size(); ++s) {
      if (margin[s] < kTieMargin) break;
      EXPECT_EQ(got->accept_lengths[s], want[s]) << "prompt " << i << " step " << s;
      ++compared;
    }
    for (int32_t a : want) accepted += a;
    steps += static_cast<int64_t>(want.size());
  }
  // The golden is a check of the drafter only if drafts get accepted and enough steps are
  // clear of ties (31 of 78 with this golden).
  EXPECT_GT(static_cast<double>(accepted) / static_cast<double>(steps), 1.5);
  EXPECT_GE(4 * compared, steps) << compared << " of " << steps << " steps compared";
}

}  // namespace
}  // namespace tandem::models
