// The device-memory check at validation (JobRunner::Check): the target's weights and
// workspace and the drafter's parameters with their optimizer state, workspace, context
// buffers and eval decoder, added up per GPU, against the GPU's memory. The 27B example
// (measured on the H200: 91.2 GiB in use with one context batch) is refused on 48 GiB and
// 80 GB GPUs before anything loads, naming the GPU and what each replica needs, and
// validates on an H200-sized one; the estimates themselves are checked against the models'
// shapes.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "actors/dflash/drafter_eval.h"
#include "actors/dflash/drafter_settings.h"
#include "actors/dflash/target_model.h"
#include "actors/dflash/target_settings.h"
#include "models/dflash/dflash_params.h"
#include "models/speculative/dflash2_proposal.h"
#include "runtime/core/clock.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/job_spec_keys.h"
#include "runtime/job/runner.h"
#include "runtime/sched/resources.h"

namespace tandem::dflash {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

std::string JobFileText() {
  std::ifstream in(TANDEM_SOURCE_DIR "/examples/qwen3.6-27b-1gpu.toml");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Result<JobSpec> Example27b() {
  return ParseJobText(JobFileText(), TANDEM_SOURCE_DIR "/examples/qwen3.6-27b-1gpu.toml");
}

const ConfigValue& Section(const JobSpec& job, const std::string& group) {
  for (const ActorGroupSpec& g : job.actors)
    if (g.name == group) return g.settings;
  ADD_FAILURE() << "no group " << group;
  static const ConfigValue none;
  return none;
}

TEST(DeviceMemoryCheckTest, The27bExampleIsRefusedOnASmallGpuAndFitsAnH200) {
  auto job = Example27b();
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  auto spec = ParseTargetModelSpec(Section(*job, "target"), job->seed);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  std::string what;
  const uint64_t target_bytes = TargetDeviceBytes(*spec, &what);
  EXPECT_EQ(what, "the target's weights and activation workspace");

  const sched::NodeResources small = sched::FakeResources(1, 8, 64 * kGiB, 48 * kGiB);
  const Status st = JobRunner::Check(*job, nullptr, &small);
  ASSERT_FALSE(st.ok());
  const std::string msg = st.ToString();
  std::printf("%s\n", msg.c_str());
  EXPECT_NE(msg.find("GPU 0 (fake-gpu, 48.0 GiB) cannot hold what is placed on it"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("target/0 " + FormatBytes(target_bytes) + " (" + what + ")"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("drafter/0 "), std::string::npos) << msg;
  EXPECT_NE(msg.find("B parameters with their optimizer state"), std::string::npos) << msg;

  // An 80 GB H100 (79.6 GiB) cannot hold it either (the H200 run used 91.2 GiB in all);
  // an H200 (139.8 GiB) can.
  const sched::NodeResources h100 = sched::FakeResources(1, 8, 64 * kGiB, 81'559'000'000ull);
  EXPECT_FALSE(JobRunner::Check(*job, nullptr, &h100).ok());
  const sched::NodeResources h200 = sched::FakeResources(1, 8, 64 * kGiB, 150'119'000'000ull);
  const Status ok = JobRunner::Check(*job, nullptr, &h200);
  EXPECT_TRUE(ok.ok()) << ok.ToString();
}

// The FP8 27B target (measured on the H200 with a larger workspace: 31.7 GiB in use once
// loaded, 68.8 GiB with the drafter): e4m3 projections, quantized layer by layer as they
// load, so the bound is the e4m3 weights plus the workspace; the FP8 example then fits an
// 80 GB GPU, which the bf16 one does not.
TEST(DeviceMemoryCheckTest, TheFp8HybridExampleFitsAn80GbGpu) {
  auto job = Example27b();
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  auto spec = ParseTargetModelSpec(Section(*job, "target"), job->seed);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  TargetModelSpec fp8 = *spec;
  fp8.precision = models::TargetPrecision::kFp8;
  const uint64_t fp8_weights = TargetWeightBytes(fp8);
  // 64 layers: 50.3 GiB in bf16; e4m3 halves all but the embedding, LM head and norms.
  EXPECT_GT(fp8_weights, 27 * kGiB);
  EXPECT_LT(fp8_weights, 28 * kGiB);
  std::string what;
  const uint64_t bound = TargetDeviceBytes(fp8, &what);
  EXPECT_EQ(what, "the target's weights and activation workspace");
  // The fp8 workspace: 4.32 GiB measured, then 4.04 GiB once the gated delta rule's scratch
  // lost its w and u (T diag(beta) per chunk instead); 3.32 GiB, as measured on the H200,
  // since the gated norm and SwiGLU write e4m3 without a bf16 buffer.
  EXPECT_GT(bound, fp8_weights + 3.3 * kGiB);
  EXPECT_LT(bound, fp8_weights + 3.4 * kGiB);
  std::printf("fp8 27B target: weights %.2f GiB, bound %.2f GiB\n", fp8_weights / double(kGiB),
              bound / double(kGiB));

  std::string text = JobFileText();
  text.replace(text.find("max_tokens = 16384"), 18, "max_tokens = 16384\nprecision = \"fp8\"");
  auto fp8_job = ParseJobText(text, "qwen3.6-27b-1gpu.toml");
  ASSERT_TRUE(fp8_job.ok()) << fp8_job.status().ToString();
  const sched::NodeResources h100 = sched::FakeResources(1, 8, 64 * kGiB, 81'559'000'000ull);
  const Status fits = JobRunner::Check(*fp8_job, nullptr, &h100);
  EXPECT_TRUE(fits.ok()) << fits.ToString();
  EXPECT_FALSE(JobRunner::Check(*job, nullptr, &h100).ok());
}

TEST(DeviceMemoryCheckTest, EstimatesFollowTheShapes) {
  auto job = Example27b();
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  auto spec = ParseTargetModelSpec(Section(*job, "target"), job->seed);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  // The 27B text model: ~26.9 B parameters in bf16. The H200 run measured 54.14 GiB in use
  // with the target loaded, of which 4.04 GiB were its activation workspace (3.76 GiB since
  // the gated delta rule keeps T diag(beta) per chunk instead of w and u).
  const uint64_t weights = TargetWeightBytes(*spec);
  EXPECT_GT(weights, 49 * kGiB);
  EXPECT_LT(weights, 51 * kGiB);
  std::string what;
  const uint64_t with_workspace = TargetDeviceBytes(*spec, &what);
  EXPECT_GT(with_workspace, weights + 3.7 * kGiB);
  EXPECT_LT(with_workspace, weights + 3.8 * kGiB);
  // FP8 halves the layers' projections only: between half and all of the bf16 bytes.
  TargetModelSpec fp8 = *spec;
  fp8.family = TargetFamily::kDense;
  fp8.hybrid.reset();
  fp8.precision = models::TargetPrecision::kFp8;
  TargetModelSpec dense = fp8;
  dense.precision = models::TargetPrecision::kBf16;
  EXPECT_LT(TargetWeightBytes(fp8), TargetWeightBytes(dense));
  EXPECT_GT(2 * TargetWeightBytes(fp8), TargetWeightBytes(dense));

  // The drafter: 18 bytes per parameter of its layout.
  auto ds = ParseDrafterSettings(Section(*job, "drafter"), JobSectionContext(*job, "drafter"));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  const int64_t params = models::MakeDFlashParamLayout(DrafterConfig(*ds, ds->target)).total;
  EXPECT_GT(params, 1'500'000'000);  // 5 layers of hidden 5120, MLP 17408, plus fc
  EXPECT_LT(params, 2'000'000'000);
}

// The dense target's bound counts its activation workspace, and a drafter with an eval table
// counts the eval decoder's own memory (DrafterEval::DeviceBytesBound), so validation refuses
// what the run would not fit.
TEST(DeviceMemoryCheckTest, DenseWorkspaceAndEvalDecoderAreCounted) {
  auto job = Example27b();
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  auto spec = ParseTargetModelSpec(Section(*job, "target"), job->seed);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  TargetModelSpec dense = *spec;
  dense.family = TargetFamily::kDense;
  dense.hybrid.reset();
  std::string what;
  EXPECT_EQ(TargetDeviceBytes(dense, &what),
            TargetWeightBytes(dense) + static_cast<uint64_t>(models::Qwen3Target::WorkspaceBytes(
                                           dense.config, dense.max_tokens, dense.precision)));
  EXPECT_EQ(what, "the target's weights and activation workspace");

  const std::string prompts = ::testing::TempDir() + "/eval_prompts.jsonl";
  std::ofstream(prompts) << "{\"input_ids\": [1, 2, 3]}\n";
  auto with_eval = ParseJobText(JobFileText() + "\n[actors.drafter.eval]\nevery_steps = 10\n"
                                "prompts = \"" + prompts + "\"\n",
                                "qwen3.6-27b-1gpu.toml");
  ASSERT_TRUE(with_eval.ok()) << with_eval.status().ToString();
  const auto plain = DrafterKeys().EstimateDeviceBytes(Section(*job, "drafter"),
                                                       JobSectionContext(*job, "drafter"));
  const auto evaluated = DrafterKeys().EstimateDeviceBytes(
      Section(*with_eval, "drafter"), JobSectionContext(*with_eval, "drafter"));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  ASSERT_TRUE(evaluated.ok()) << evaluated.status().ToString();
  auto ds = ParseDrafterSettings(Section(*with_eval, "drafter"),
                                 JobSectionContext(*with_eval, "drafter"));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  ASSERT_TRUE(ds->eval.enabled);
  auto bound = DrafterEval::DeviceBytesBound(ds->eval, ds->target, DrafterConfig(*ds, ds->target));
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  EXPECT_EQ(evaluated->bytes, plain->bytes + static_cast<uint64_t>(*bound));
  EXPECT_NE(evaluated->what.find("eval decoder " + FormatBytes(static_cast<uint64_t>(*bound))),
            std::string::npos) << evaluated->what;
  // The 27B at the defaults (prompts up to 1024 tokens, 64 new, block 16: a 1104-token
  // context): more than its KV cache (16 attention layers x 4 x 256) and features (5 x 5120),
  // and the decoder target's workspace for 1024 tokens (~1/16 of the 3.76 GiB at 16384).
  const int64_t ctx = 1024 + 64 + 16;
  EXPECT_GT(*bound, 2 * 16 * ctx * 1024 * 2 + 5 * ctx * 5120 * 2 + 3.76 * kGiB / 16);
  EXPECT_LT(*bound, 2 * kGiB);
  std::printf("eval decoder bound for the 27B example: %.3f GiB\n", *bound / double(kGiB));
}

// A DFlash2 drafter's eval bound adds its proposer's buffers (DFlash2Proposer::WorkspaceBytes
// at the block size) besides its own, larger, drafter workspace: exactly those two terms
// apart from the DFlash drafter's bound at the same settings.
TEST(DeviceMemoryCheckTest, EvalBoundCountsTheDFlash2Proposer) {
  auto job = Example27b();
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const std::string prompts = ::testing::TempDir() + "/eval_prompts_dflash2.jsonl";
  std::ofstream(prompts) << "{\"input_ids\": [1, 2, 3]}\n";
  auto with_eval = ParseJobText(JobFileText() + "\n[actors.drafter.eval]\nevery_steps = 10\n"
                                "prompts = \"" + prompts + "\"\n",
                                "qwen3.6-27b-1gpu.toml");
  ASSERT_TRUE(with_eval.ok()) << with_eval.status().ToString();
  auto ds = ParseDrafterSettings(Section(*with_eval, "drafter"),
                                 JobSectionContext(*with_eval, "drafter"));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  const models::DFlashConfig c1 = DrafterConfig(*ds, ds->target);
  models::DFlashConfig c2 = c1;
  c2.layers.architectures = {"DFlash2DraftModel"};
  c2.is_causal = false;
  c2.dflash2 = models::DFlash2Extension{.conv_kernel_size = 2, .conv_group_size = 16,
                                        .selector_rank = 256, .selector_top_k = 16};
  auto b1 = DrafterEval::DeviceBytesBound(ds->eval, ds->target, c1);
  auto b2 = DrafterEval::DeviceBytesBound(ds->eval, ds->target, c2);
  ASSERT_TRUE(b1.ok()) << b1.status().ToString();
  ASSERT_TRUE(b2.ok()) << b2.status().ToString();
  models::DFlashDrafterOptions dopt;
  dopt.max_tokens = ds->eval.max_prompt_tokens + ds->eval.max_new_tokens + c1.block_size;
  dopt.num_blocks = models::kDrafterBlocksCuda;
  auto w1 = models::DFlashDrafter::WorkspaceBytes(c1, dopt, kernels::Device::Cuda(0));
  auto w2 = models::DFlashDrafter::WorkspaceBytes(c2, dopt, kernels::Device::Cuda(0));
  ASSERT_TRUE(w1.ok() && w2.ok());
  const int64_t proposer = models::DFlash2Proposer::WorkspaceBytes(c2, c2.block_size);
  EXPECT_GT(proposer, c2.block_size * c2.layers.vocab_size * 4);  // its f32 logits and more
  EXPECT_EQ(*b2 - *b1, (*w2 - *w1) + proposer);
}

// A drafter without a target replica on its GPU loads its own copy of the target's embedding
// and LM head, or with an eval table the whole target: the bound counts it there, not when a
// target replica shares the GPU.
TEST(DeviceMemoryCheckTest, ADrafterAloneOnItsGpuCountsItsOwnHeadOrTarget) {
  std::string text = JobFileText();
  text.replace(text.find("max_tokens = 16384"), 18, "max_tokens = 16384\nprecision = \"fp8\"");
  for (size_t at = text.find("gpus = 0.5"); at != std::string::npos;
       at = text.find("gpus = 0.5"))
    text.replace(at, 10, "gpus = 1  ");
  auto apart = ParseJobText(text, "qwen3.6-27b-2gpu.toml");
  ASSERT_TRUE(apart.ok()) << apart.status().ToString();
  // The fp8 target (30.7 GiB) fits 40 GiB; the drafter (37.9 GiB) fits too, but not with
  // its own embedding and LM head (2 x 248320 x 5120 bf16 = 4.7 GiB).
  const sched::NodeResources small = sched::FakeResources(2, 8, 64 * kGiB, 40 * kGiB);
  const Status st = JobRunner::Check(*apart, nullptr, &small);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("drafter/0 "), std::string::npos) << st.ToString();
  EXPECT_NE(st.ToString().find("no target replica on this GPU: its own embedding and LM head "
                               "4.7 GiB"),
            std::string::npos) << st.ToString();
  const sched::NodeResources mid = sched::FakeResources(2, 8, 64 * kGiB, 48 * kGiB);
  const Status fits = JobRunner::Check(*apart, nullptr, &mid);
  EXPECT_TRUE(fits.ok()) << fits.ToString();

  // With an eval table the drafter's GPU holds a whole second target (drafter_actor.cc).
  const std::string prompts = ::testing::TempDir() + "/alone_prompts.jsonl";
  std::ofstream(prompts) << "{\"input_ids\": [1, 2, 3]}\n";
  auto evaluated = ParseJobText(
      text + "\n[actors.drafter.eval]\nevery_steps = 10\nprompts = \"" + prompts + "\"\n",
      "qwen3.6-27b-2gpu.toml");
  ASSERT_TRUE(evaluated.ok()) << evaluated.status().ToString();
  const Status refused = JobRunner::Check(*evaluated, nullptr, &mid);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.ToString().find("no target replica on this GPU: its own target for the eval"),
            std::string::npos) << refused.ToString();
  std::printf("%s\n", refused.ToString().c_str());
  const sched::NodeResources h100 = sched::FakeResources(2, 8, 64 * kGiB, 81'559'000'000ull);
  const Status roomy = JobRunner::Check(*evaluated, nullptr, &h100);
  EXPECT_TRUE(roomy.ok()) << roomy.ToString();
  // Colocated (the example as it is), the eval shares the target replica's weights.
  auto colocated = ParseJobText(JobFileText() + "\n[actors.drafter.eval]\nevery_steps = 10\n"
                                "prompts = \"" + prompts + "\"\n",
                                "qwen3.6-27b-1gpu.toml");
  ASSERT_TRUE(colocated.ok()) << colocated.status().ToString();
  const sched::NodeResources h200 = sched::FakeResources(1, 8, 64 * kGiB, 150'119'000'000ull);
  const Status one = JobRunner::Check(*colocated, nullptr, &h200);
  EXPECT_TRUE(one.ok()) << one.ToString();
}

}  // namespace
}  // namespace tandem::dflash
