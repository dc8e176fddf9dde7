// GPU tests of KV-cache decoding and DFlash speculative decoding (label gpu; SKIPPED without
// a device): the cached attention kernel against its CPU reference on odd shapes, a cropped
// cache against a fresh forward on CUDA, the PyTorch decode golden on CUDA, and batched
// decoding (ExtendBatch, DFlashBatchDecoder) against one sequence at a time on CUDA, and
// seeded speculative sampling on CUDA; mixture-of-experts targets of both families
// (qwen3_moe, qwen3_5_moe) decoding speculatively on CUDA as the target decodes alone, and
// `tandem eval`'s library call on them on CUDA.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/attention/decode_attention.h"
#include "kernels/core/device_pools.h"
#include "kernels/core/stream.h"
#include "kernels/testing/testing.h"
#include "models/dflash/dflash_checkpoint.h"
#include "models/io/safetensors.h"
#include "models/qwen3/qwen3_test_util.h"
#include "models/qwen3_5/qwen3_5_moe_test_util.h"
#include "models/speculative/dflash_batch_decoder.h"
#include "models/speculative/dflash_decoder.h"
#include "models/speculative/moe_decode_test_util.h"

namespace tandem::models {
namespace {

using kernels::bf16;
using kernels::DType;
using kernels::TensorView;

#define SKIP_WITHOUT_GPU() \
  if (kernels::CudaDeviceCount() == 0) GTEST_SKIP() << "SKIPPED: no CUDA device"

std::vector<bf16> Random(int64_t n, uint32_t seed) {
  std::vector<bf16> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& e : v) {
    x = x * 1664525u + 1013904223u;
    e = bf16(static_cast<float>(x >> 8) / 16777216.0f * 2 - 1);
  }
  return v;
}

TEST(CachedAttentionGpuTest, MatchesCpuReferenceOnOddShapes) {
  SKIP_WITHOUT_GPU();
  kernels::DevicePools pools;  // outlives every tensor of the test
  kernels::CachingPool* pool = pools.Pool(0).value();
  struct Case { int64_t b, p, hq, hk, d; };
  for (const Case c : {Case{1, 1, 2, 1, 16}, Case{5, 37, 4, 2, 16}, Case{16, 300, 8, 2, 64},
                       Case{3, 1025, 6, 3, 128}, Case{16, 2063, 32, 8, 128},
                       Case{7, 90, 4, 4, 256}, Case{4, 50, 4, 2, 98}, Case{2, 33, 2, 1, 33},
                       Case{3, 21, 2, 2, 24}, Case{600, 600, 4, 2, 128}}) {
    const auto q = Random(c.b * c.hq * c.d, 1), k = Random(c.p * c.hk * c.d, 2),
               v = Random(c.p * c.hk * c.d, 3);
    std::vector<bf16> want(q.size()), got(q.size());
    auto view = [](const std::vector<bf16>& x, kernels::Shape s) {
      return TensorView(const_cast<bf16*>(x.data()), DType::kBF16, s);
    };
    ASSERT_TRUE(kernels::CachedCausalAttentionForwardCpu(
                    view(q, {c.b, c.hq, c.d}), view(k, {c.p, c.hk, c.d}),
                    view(v, {c.p, c.hk, c.d}), 0.f, view(want, {c.b, c.hq, c.d}))
                    .ok());
    auto dq = kernels::testing::MakeTensor<bf16>(*pool, DType::kBF16, {c.b, c.hq, c.d}, q);
    auto dk = kernels::testing::MakeTensor<bf16>(*pool, DType::kBF16, {c.p, c.hk, c.d}, k);
    auto dv = kernels::testing::MakeTensor<bf16>(*pool, DType::kBF16, {c.p, c.hk, c.d}, v);
    auto made = kernels::Tensor::Empty(*pool, DType::kBF16, {c.b, c.hq, c.d});
    ASSERT_TRUE(made.ok());
    kernels::Tensor dout = std::move(*made);
    ASSERT_TRUE(kernels::CachedCausalAttentionForward(dq, dk, dv, 0.f, dout, nullptr).ok());
    ASSERT_TRUE(kernels::CopyToHost(got.data(), dout, nullptr).ok());
    // fp32 accumulation in another order, one bf16 rounding of the output: within 2 ulp.
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::fabs(double(got[i].f()) - want[i].f()) /
                                  (1e-2 + std::fabs(double(want[i].f()))));
    EXPECT_LT(worst, 1.6e-2) << c.b << "x" << c.p << " d " << c.d;
  }
}

// TANDEM_GOLDEN_DIR overrides where the goldens are read (a GPU host's copy).
const std::string kDir = std::getenv("TANDEM_GOLDEN_DIR")
                             ? std::string(std::getenv("TANDEM_GOLDEN_DIR")) + "/"
                             : std::string(TANDEM_SOURCE_DIR) + "/tests/golden/";

std::vector<int32_t> ReadI32(const SafetensorsReader& r, const std::string& name) {
  const TensorInfo* t = r.Find(name);
  std::vector<int32_t> out(t ? t->numel() : 0);
  if (t) {
    EXPECT_TRUE(r.Read(*t, DType::kI32, out.data(), t->numel() * 4).ok());
  }
  return out;
}

TEST(DFlashDecoderGpuTest, GoldenDecodesOnCuda) {
  SKIP_WITHOUT_GPU();
  const std::string golden = kDir + "dflash_decode_tiny_golden.safetensors";
  if (!std::filesystem::exists(golden)) GTEST_SKIP() << golden << " is missing";
  auto r = SafetensorsReader::Open(golden);
  ASSERT_TRUE(r.ok());
  auto stream = kernels::CudaStream::Create(0);
  ASSERT_TRUE(stream.ok());
  const kernels::Stream s = stream->get();
  kernels::DevicePools pools;  // outlives the target, drafter and decoder
  kernels::CachingPool* pool = pools.Pool(0).value();
  auto target = Qwen3Target::Load(kDir + "dflash_decode_tiny/target", *pool,
                                  {.max_tokens = 64, .stream = s});
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  auto config = LoadDFlashConfig(kDir + "dflash_decode_tiny/drafter");
  ASSERT_TRUE(config.ok());
  const int64_t d = config->layers.head_dim;
  if (d != 64 && d != 128 && d != 256)
    GTEST_SKIP() << "SKIPPED: the golden drafter has head_dim " << d
                 << "; the CUDA block attention takes 64, 128 or 256";
  SpecDecodeOptions o;
  o.max_new_tokens = std::stoll(r->metadata().at("max_new_tokens"));
  o.block_size = std::stoll(r->metadata().at("block_size"));
  const int prompts = std::stoi(r->metadata().at("prompts"));
  std::vector<std::vector<int32_t>> all_prompts, all_tokens;
  for (int i = 0; i < prompts; ++i) {
    all_prompts.push_back(ReadI32(*r, fmt::format("prompt.{}", i)));
    all_tokens.push_back(ReadI32(*r, fmt::format("tokens.{}", i)));
  }
  // One block (the plan tables' 16-byte alignment makes it legal on CUDA) and padded blocks.
  for (int64_t blocks : {int64_t{1}, kDrafterBlocksCuda}) {
    SCOPED_TRACE(fmt::format("drafter blocks {}", blocks));
    auto drafter =
        DFlashDrafter::Create(*config, {.max_tokens = 128, .num_blocks = blocks}, *pool, s);
    ASSERT_TRUE(drafter.ok()) << drafter.status().ToString();
    ASSERT_TRUE(LoadDFlashWeights(kDir + "dflash_decode_tiny/drafter", **drafter).ok());
    auto decoder = DFlashDecoder::Create(target->get(), drafter->get(), 128, s);
    ASSERT_TRUE(decoder.ok()) << decoder.status().ToString();
    for (int i = 0; i < prompts; ++i) {
      auto got = (*decoder)->Generate(all_prompts[i], o);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(got->tokens, all_tokens[i]) << "prompt " << i;
      // As the CPU golden test: accept lengths up to the first near-tie decision.
      const std::vector<int32_t> want = ReadI32(*r, fmt::format("accept.{}", i));
      const TensorInfo* mt = r->Find(fmt::format("margin.{}", i));
      ASSERT_NE(mt, nullptr);
      std::vector<float> margin(mt->numel());
      ASSERT_TRUE(r->Read(*mt, DType::kF32, margin.data(), mt->numel() * 4).ok());
      for (size_t s = 0; s < want.size() && s < got->accept_lengths.size(); ++s) {
        if (margin[s] < 0.1f) break;
        EXPECT_EQ(got->accept_lengths[s], want[s]) << "prompt " << i << " step " << s;
      }
    }
    // Sampled with top-k: RowTopK selects the candidates on the device and only they come
    // back; a seed repeats its tokens.
    SpecDecodeOptions sampled = o;
    sampled.temperature = 0.7f;
    sampled.top_k = 20;
    sampled.seed = 9;
    for (int i = 0; i < prompts; ++i) {
      sampled.prompt_index = static_cast<uint64_t>(i);
      auto first = (*decoder)->Generate(all_prompts[i], sampled);
      auto again = (*decoder)->Generate(all_prompts[i], sampled);
      ASSERT_TRUE(first.ok() && again.ok()) << first.status().ToString();
      EXPECT_EQ(first->tokens, again->tokens) << "sampled, prompt " << i;
      EXPECT_EQ(first->accept_lengths, again->accept_lengths) << "sampled, prompt " << i;
    }
  }
  // Batched on CUDA, three prompts per forward with the drafter: greedy speculative decoding
  // returns the target's own tokens, so every prompt's tokens equal the golden's.
  auto drafter = DFlashDrafter::Create(
      *config, {.max_tokens = 3 * 128, .num_blocks = DrafterBlocksForBatch(3, pool->device())},
      *pool, s);
  ASSERT_TRUE(drafter.ok()) << drafter.status().ToString();
  ASSERT_TRUE(LoadDFlashWeights(kDir + "dflash_decode_tiny/drafter", **drafter).ok());
  auto batch = DFlashBatchDecoder::Create(target->get(), drafter->get(), 3, 128, s);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  auto batched = (*batch)->GenerateAll(all_prompts, o);
  ASSERT_TRUE(batched.ok()) << batched.status().ToString();
  ASSERT_EQ(batched->size(), all_prompts.size());
  for (int i = 0; i < prompts; ++i)
    EXPECT_EQ((*batched)[i].tokens, all_tokens[i]) << "batched, prompt " << i;
  // Speculative sampling on CUDA (logits copied to the host, filtered there): a seed repeats
  // its tokens bit for bit, and the trained drafter gets drafts kept.
  o.temperature = 0.7f;
  o.top_k = 20;
  o.seed = 9;
  auto first = (*batch)->GenerateAll(all_prompts, o);
  auto again = (*batch)->GenerateAll(all_prompts, o);
  ASSERT_TRUE(first.ok() && again.ok()) << first.status().ToString();
  int64_t steps = 0, kept = 0;
  for (int i = 0; i < prompts; ++i) {
    EXPECT_EQ((*first)[i].tokens, (*again)[i].tokens) << "sampled, prompt " << i;
    EXPECT_EQ((*first)[i].accept_lengths, (*again)[i].accept_lengths) << "sampled, prompt " << i;
    for (int32_t a : (*first)[i].accept_lengths) {
      ++steps;
      kept += a - 1;
    }
  }
  EXPECT_GT(kept, steps / 4);
}

// ExtendBatch over three sequences on CUDA against an Extend of each alone: the same within
// bf16 rounding (the GEMMs see other row counts), and the batched greedy decode at block size
// 1 (random prompts, no drafter) gives the same tokens for nearly every prompt (a near-tie may
// break the other way). GoldenDecodesOnCuda covers batching with the drafter.
TEST(DFlashBatchDecoderGpuTest, BatchedMatchesOneAtATimeOnCuda) {
  SKIP_WITHOUT_GPU();
  auto stream = kernels::CudaStream::Create(0);
  ASSERT_TRUE(stream.ok());
  const kernels::Stream s = stream->get();
  const auto dev = kernels::Device::Cuda(0);
  kernels::DevicePools pools;  // outlives the target, caches and decoders
  kernels::CachingPool* pool = pools.Pool(0).value();
  auto target = Qwen3Target::Load(kDir + "dflash_decode_tiny/target", *pool,
                                  {.max_tokens = 64, .stream = s});
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  const TransformerConfig& c = (*target)->config();
  const int64_t v = c.vocab_size;
  auto alone = Qwen3BatchKvCache::Create(c, 3, 40, *pool, s);
  auto batched = Qwen3BatchKvCache::Create(c, 3, 40, *pool, s);
  ASSERT_TRUE(alone.ok() && batched.ok());
  auto logits = kernels::Tensor::Empty(*pool, DType::kF32, {16, v}, s);
  ASSERT_TRUE(logits.ok());
  const std::vector<std::vector<int32_t>> prompts = {{3, 9, 27, 40, 5}, {7, 1}, {60, 2, 33, 8}};
  const std::vector<std::vector<int32_t>> blocks = {{11, 12, 13}, {14}, {15, 16, 17, 18}};
  std::vector<float> want, got(8 * v), rows;
  for (int64_t q = 0; q < 3; ++q) {
    for (auto* cache : {&*alone, &*batched})
      ASSERT_TRUE((*target)->Extend(cache->sequence(q), prompts[q], {}).ok());
    const int64_t n = static_cast<int64_t>(blocks[q].size());
    ASSERT_TRUE((*target)
                    ->Extend(alone->sequence(q), blocks[q], {}, logits->view().Narrow(0, 0, n))
                    .ok());
    rows.resize(n * v);
    ASSERT_TRUE(kernels::CopyToHost(rows.data(), logits->view().Narrow(0, 0, n), s).ok());
    ASSERT_TRUE(kernels::SynchronizeStream(dev, s).ok());
    want.insert(want.end(), rows.begin(), rows.end());
  }
  const std::vector<BatchExtendPart> parts = {{0, blocks[0]}, {1, blocks[1]}, {2, blocks[2]}};
  ASSERT_TRUE((*target)->ExtendBatch(*batched, parts, {}, logits->view().Narrow(0, 0, 8)).ok());
  ASSERT_TRUE(kernels::CopyToHost(got.data(), logits->view().Narrow(0, 0, 8), s).ok());
  ASSERT_TRUE(kernels::SynchronizeStream(dev, s).ok());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / (1.0 + std::fabs(want[i])));
  EXPECT_LT(worst, 5e-2);

  auto single = DFlashDecoder::Create(target->get(), nullptr, 96, s);
  auto multi = DFlashBatchDecoder::Create(target->get(), nullptr, 3, 96, s);
  ASSERT_TRUE(single.ok() && multi.ok());
  SpecDecodeOptions o;
  o.max_new_tokens = 24;
  o.block_size = 1;
  std::vector<std::vector<int32_t>> many;
  for (int i = 0; i < 8; ++i) many.push_back({int32_t(i), int32_t(3 * i % 64), 5, int32_t(i + 9)});
  auto all = (*multi)->GenerateAll(many, o);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  int same = 0;
  for (size_t i = 0; i < many.size(); ++i) {
    auto one = (*single)->Generate(many[i], o);
    ASSERT_TRUE(one.ok()) << one.status().ToString();
    ASSERT_EQ((*all)[i].tokens.size(), 24u);
    same += (*all)[i].tokens == one->tokens;
  }
  EXPECT_GE(same, 6) << same << " of 8 prompts decode the same batched";
}

// A tiny random MoE target of the committed golden's shape (tests/golden/qwen3_moe_tiny or
// qwen3_5_moe_tiny, shapes the GPU golden tests run) with a vocabulary of 6, written to
// `dir`: its logits are far apart, so CUDA's rounding seldom decides a token.
void WriteTinyMoe(bool hybrid, const std::string& dir) {
  std::filesystem::create_directories(dir);
  if (!hybrid) {
    auto c = LoadTransformerConfig(kDir + "qwen3_moe_tiny");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    c->vocab_size = 6;
    ASSERT_TRUE(testing::WriteCheckpoint(dir, *c, testing::RandomHostWeights(*c, 21)).ok());
    return;
  }
  std::ifstream f(kDir + "qwen3_5_moe_tiny/config.json");
  nlohmann::json j = nlohmann::json::parse(f);
  j["text_config"]["vocab_size"] = 6;
  auto c = ParseQwen35Config(j, "qwen3_5_moe_tiny, vocab 6");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  testing::WriteCheckpoint(dir, j, testing::RandomCheckpoint(*c, 21));
}

// (top logit - second) / the logits' RMS around their mean, of the last row after `target`
// prefills `seq` from an empty cache on CUDA.
double TopTwoGap(DecodeTarget& target, const std::vector<int32_t>& seq, kernels::Stream s) {
  const int64_t t = static_cast<int64_t>(seq.size()), v = target.shape().vocab_size;
  auto logits = kernels::Tensor::Empty(target.allocator(), DType::kF32, {t, v}, s);
  EXPECT_TRUE(logits.ok());
  EXPECT_TRUE(target.Reset().ok());
  const Status st = target.Extend(seq, {}, logits->view());
  EXPECT_TRUE(st.ok()) << st.ToString();
  std::vector<float> row(v);
  EXPECT_TRUE(kernels::CopyToHost(row.data(), logits->view().Narrow(0, t - 1, 1), s).ok());
  EXPECT_TRUE(kernels::SynchronizeStream(target.device(), s).ok());
  std::vector<float> sorted = row;
  std::sort(sorted.rbegin(), sorted.rend());
  double mean = 0, var = 0;
  for (float x : row) mean += x / v;
  for (float x : row) var += (x - mean) * (x - mean) / v;
  return (sorted[0] - sorted[1]) / std::sqrt(std::max(var, 1e-30));
}

// CUDA rounds a verify block and a one-token step differently (GEMM row counts, the MoE
// block's grouping of tokens by expert), so two decodes may part where the target's top two
// logits nearly tie. Greedy speculative decoding at block sizes 5 and 16 must give the
// tokens of block size 1 (the target alone, one token per Extend) up to such a tie: where
// they first differ, the gap (a fresh prefill of the common prefix) must be under 0.2 of the
// logits' RMS. On the CPU (where the decodes agree exactly) a quarter of these targets'
// greedy picks have a gap under 0.2 and a twentieth under 0.03, so a lost rollback or a MoE
// block that ran on the wrong rows, which parts every decode at a random token, is caught
// with probability 1 - 0.25^8 or better.
TEST(MoeDecodeGpuTest, GreedySpeculativeMatchesTheTargetsGreedyOnCuda) {
  SKIP_WITHOUT_GPU();
  auto stream = kernels::CudaStream::Create(0);
  ASSERT_TRUE(stream.ok());
  const kernels::Stream s = stream->get();
  kernels::DevicePools pools;  // outlives the targets, drafters and decoders
  kernels::CachingPool* pool = pools.Pool(0).value();
  const testing::ScratchDir scratch;
  const std::vector<std::vector<int32_t>> prompts = {
      {3, 1, 1, 4, 4, 4, 3, 2, 0}, {0, 5}, {2, 2, 3, 1, 5, 4, 0, 1, 1, 2, 3, 3, 4}, {4}};
  for (const bool hybrid : {false, true}) {
    SCOPED_TRACE(hybrid ? "qwen3_5_moe" : "qwen3_moe");
    const std::string dir = scratch.path() + (hybrid ? "/qwen3_5_moe" : "/qwen3_moe");
    ASSERT_NO_FATAL_FAILURE(WriteTinyMoe(hybrid, dir));
    const DecodeTargetOptions to{.max_tokens = 128, .capacity = 128, .max_rollback = 16,
                                 .stream = s};
    auto target = LoadDecodeTarget(dir, *pool, to), fresh = LoadDecodeTarget(dir, *pool, to);
    ASSERT_TRUE(target.ok() && fresh.ok()) << target.status().ToString();
    EXPECT_TRUE((*target)->shape().moe);
    EXPECT_EQ((*target)->shape().hybrid, hybrid);
    auto drafter = DFlashDrafter::Create(
        testing::TinyDrafterForShape((*target)->shape(), {1, 3}, /*head_dim=*/64),
        {.max_tokens = 128, .num_blocks = kDrafterBlocksCuda}, *pool, s);
    ASSERT_TRUE(drafter.ok()) << drafter.status().ToString();
    ASSERT_NO_FATAL_FAILURE(testing::RandomizeDrafter(**drafter, 5));
    auto decoder = DFlashDecoder::Create(std::move(*target), drafter->get(), 128, s);
    ASSERT_TRUE(decoder.ok()) << decoder.status().ToString();
    int decodes = 0, agree = 0;
    for (const std::vector<int32_t>& prompt : prompts) {
      SpecDecodeOptions o;
      o.max_new_tokens = 48;
      o.block_size = 1;
      auto base = (*decoder)->Generate(prompt, o);
      ASSERT_TRUE(base.ok()) << base.status().ToString();
      for (int64_t b : {5, 16}) {
        o.block_size = b;
        auto r = (*decoder)->Generate(prompt, o);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        ASSERT_EQ(r->tokens.size(), base->tokens.size());
        ++decodes;
        const auto at =
            std::mismatch(r->tokens.begin(), r->tokens.end(), base->tokens.begin()).first;
        if (at == r->tokens.end()) {
          ++agree;
          continue;
        }
        std::vector<int32_t> prefix = prompt;
        prefix.insert(prefix.end(), r->tokens.begin(), at);
        const double gap = TopTwoGap(**fresh, prefix, s);
        std::printf("block %lld parts from the target's greedy at token %td (gap %.4f)\n",
                    static_cast<long long>(b), at - r->tokens.begin(), gap);
        EXPECT_LT(gap, 0.2) << "block size " << b << ": not a near tie";
      }
    }
    std::printf("%d of %d decodes equal the target's greedy tokens to the end\n", agree,
                decodes);
    // Speculative sampling on CUDA repeats per seed.
    SpecDecodeOptions sampled;
    sampled.max_new_tokens = 24;
    sampled.block_size = 5;
    sampled.temperature = 1.0f;
    sampled.seed = 3;
    auto first = (*decoder)->Generate(prompts[0], sampled);
    auto again = (*decoder)->Generate(prompts[0], sampled);
    ASSERT_TRUE(first.ok() && again.ok()) << first.status().ToString();
    EXPECT_EQ(first->tokens, again->tokens);
    EXPECT_EQ(first->accept_lengths, again->accept_lengths);
  }
}

// `tandem eval`'s library call on CUDA over the committed tiny MoE checkpoints (the family
// from config.json), with a random drafter saved next to its prompts; qwen3_moe batched too.
TEST(MoeDecodeGpuTest, EvalRunsOnTheTinyMoeCheckpointsOnCuda) {
  SKIP_WITHOUT_GPU();
  for (const char* name : {"qwen3_moe_tiny", "qwen3_5_moe_tiny"}) {
    SCOPED_TRACE(name);
    const testing::ScratchDir scratch;
    auto shape = ReadDecodeTargetShape(kDir + name);
    ASSERT_TRUE(shape.ok()) << shape.status().ToString();
    EXPECT_TRUE(shape->moe);
    SpecEvalRequest q = testing::TinyEvalRequest(
        kDir + name, testing::TinyDrafterForShape(*shape, {1, 3}, 64), scratch.path(), 511);
    q.device = kernels::Device::Cuda(0);
    auto r = RunSpecEval(q);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->run.prompts, 2);
    EXPECT_GT(r->run.generated_tokens, 0);
    EXPECT_LE(r->run.generated_tokens, 24);
    EXPECT_GE(r->run.tau, 1.0);
    EXPECT_DOUBLE_EQ(r->baseline.tau, 1.0);
    if (!shape->hybrid) {
      q.batch = 2;
      auto b = RunSpecEval(q);
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      EXPECT_EQ(b->run.prompts, 2);
    }
  }
}

}  // namespace
}  // namespace tandem::models
