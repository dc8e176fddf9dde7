// The DFlash job against a Qwen3-MoE target (model_type qwen3_moe) on the CPU through
// JobRunner: random weights of a tiny MoE config train a drafter (the loss falls, the store
// empties, the drafter's exported layers are dense); the memory bound counts every expert's
// weights and the MoE block's buffers; precision = "fp8" trains too (experts in e4m3), and
// its bound counts the staged load: the e4m3 form beside one layer's bf16 experts.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

#include "actors/dflash/job_test_util.h"
#include "actors/dflash/target_model.h"
#include "actors/dflash/target_settings.h"
#include "models/io/weight_spec.h"
#include "models/qwen3/qwen3_target.h"

namespace tandem {
namespace {

using dflash::testing::FreshDir;

// 8 experts of width 32, top-2, layer 2 dense.
constexpr const char* kMoeKeys =
    ", model_type = \"qwen3_moe\", num_experts = 8, num_experts_per_tok = 2, "
    "moe_intermediate_size = 32, norm_topk_prob = true, mlp_only_layers = [2]";

dflash::testing::TinyJob MoeJob(const std::string& dir, int max_steps,
                                const std::string& target_extra = "") {
  return {.name = "moe-test",
          .max_steps = max_steps,
          .checkpoint_dir = dir,
          .target_extra = target_extra,
          .drafter_extra = fmt::format("metrics_file = \"{}/metrics.jsonl\"", dir),
          .target_config_extra = kMoeKeys};
}

std::vector<double> LoggedLosses(const std::string& metrics_file) {
  std::vector<double> out;
  std::ifstream f(metrics_file);
  for (std::string line; std::getline(f, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("loss") && j["loss"].is_number())
      out.push_back(j["loss"].get<double>());
  }
  return out;
}

// The target's model spec as the job `job` declares it.
Result<dflash::TargetModelSpec> TargetSpecOf(const dflash::testing::TinyJob& job) {
  ASSIGN_OR_RETURN(const JobSpec spec,
                   ParseJobText(dflash::testing::TinyJobText(job), "moe.toml"));
  for (const ActorGroupSpec& g : spec.actors)
    if (g.name == "target") return dflash::ParseTargetModelSpec(g.settings, 0);
  return NotFoundError("moe.toml: no actor group named target");
}

TEST(DFlashMoeJobTest, TrainsAgainstRandomMoeWeights) {
  const std::string dir = FreshDir("moe_train");
  auto report = dflash::testing::RunJob(MoeJob(dir, 60));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_TRUE(report->status.ok()) << report->ToString();
  EXPECT_EQ(report->store.live_objects, 0u) << report->ToString();
  const std::vector<double> losses = LoggedLosses(dir + "/metrics.jsonl");
  ASSERT_EQ(losses.size(), 6u);
  // The synthetic next tokens are a function of the anchor: a drafter learning from the MoE
  // target's captures falls well below its first logged loss.
  EXPECT_LT(losses.back(), 0.85 * losses.front()) << fmt::format("{}", fmt::join(losses, " "));
  // The exported drafter is a dense qwen3 whatever the target is.
  std::ifstream cfg(dir + "/step_00000060/config.json");
  ASSERT_TRUE(cfg.good()) << dir << "/step_00000060/config.json";
  const nlohmann::json j = nlohmann::json::parse(cfg);
  EXPECT_EQ(j.value("model_type", ""), "qwen3");
  EXPECT_FALSE(j.contains("num_experts")) << j.dump();
}

TEST(DFlashMoeJobTest, Fp8TrainsAndItsBoundCountsTheStagedLoad) {
  const std::string dir = FreshDir("moe_fp8");
  auto report = dflash::testing::RunJob(MoeJob(dir, 10, "precision = \"fp8\""));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_TRUE(report->status.ok()) << report->ToString();
  EXPECT_EQ(report->store.live_objects, 0u) << report->ToString();
  const std::vector<double> losses = LoggedLosses(dir + "/metrics.jsonl");
  ASSERT_FALSE(losses.empty());
  EXPECT_TRUE(std::isfinite(losses.back()));

  auto model = TargetSpecOf(MoeJob("/tmp", 1, "precision = \"fp8\""));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_EQ(model->precision, models::TargetPrecision::kFp8);
  const models::TransformerConfig& c = model->config;
  dflash::TargetModelSpec bf16 = *model;
  bf16.precision = models::TargetPrecision::kBf16;
  const uint64_t fp8_weights = dflash::TargetWeightBytes(*model);
  ASSERT_LT(fp8_weights, dflash::TargetWeightBytes(bf16));
  // The staged layer: q/k/v/o and the 8 experts' [2*32, H] and [H, 32] in bf16, each
  // 256-byte aligned.
  const int64_t h = c.hidden_size;
  auto aligned = [](int64_t elems) { return (elems * 2 + 255) / 256 * 256; };
  const int64_t staged = 2 * aligned(c.q_dim() * h) + 2 * aligned(c.kv_dim() * h) +
                         aligned(8 * 64 * h) + aligned(8 * h * 32);
  ASSERT_EQ(models::Qwen3Weights::StagingBytes(c), staged);

  // A workspace far below one staged layer: the load is the peak, and it holds one layer's
  // bf16 experts, not the whole bf16 model beside its e4m3 form.
  model->max_tokens = 1;
  ASSERT_LT(models::Qwen3Target::WorkspaceBytes(c, 1, model->precision), staged);
  std::string what;
  const uint64_t bound = dflash::TargetDeviceBytes(*model, &what);
  EXPECT_EQ(bound, fp8_weights + static_cast<uint64_t>(staged));
  EXPECT_LT(bound, dflash::TargetWeightBytes(bf16));
  EXPECT_NE(what.find("staged while it loads"), std::string::npos) << what;
  // A workspace above it: the steady state is the bound.
  model->max_tokens = 4096;
  const int64_t workspace = models::Qwen3Target::WorkspaceBytes(c, 4096, model->precision);
  ASSERT_GT(workspace, staged);
  EXPECT_EQ(dflash::TargetDeviceBytes(*model, &what),
            fp8_weights + static_cast<uint64_t>(workspace));
  EXPECT_EQ(what, "the target's weights and activation workspace");
}

TEST(DFlashMoeJobTest, MemoryBoundCountsExpertsAndTheirBuffers) {
  auto model = TargetSpecOf(MoeJob("/tmp", 1));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_TRUE(model->config.moe.has_value());
  const models::TransformerConfig& c = model->config;
  // Per MoE layer: the router [8, H] and 8 experts of 3 [32, H] matrices, in bf16.
  models::TransformerConfig dense = c;
  dense.moe.reset();
  dflash::TargetModelSpec dense_spec = *model;
  dense_spec.config = dense;
  const int64_t h = c.hidden_size, moe_layers = c.num_hidden_layers - 1;
  const int64_t dense_mlp = 3 * c.intermediate_size * h * 2;
  const int64_t moe_mlp = (8 * h + 8 * 3 * 32 * h) * 2;
  EXPECT_EQ(static_cast<int64_t>(dflash::TargetWeightBytes(*model)),
            static_cast<int64_t>(dflash::TargetWeightBytes(dense_spec)) +
                moe_layers * (moe_mlp - dense_mlp));
  std::string what;
  EXPECT_EQ(dflash::TargetDeviceBytes(*model, &what),
            dflash::TargetWeightBytes(*model) +
                static_cast<uint64_t>(models::Qwen3Target::WorkspaceBytes(c, model->max_tokens)));
  EXPECT_GT(models::Qwen3Target::WorkspaceBytes(c, model->max_tokens),
            models::Qwen3Target::WorkspaceBytes(dense, model->max_tokens));
}

}  // namespace
}  // namespace tandem
