// The DFlash job against a Qwen3-MoE target (model_type qwen3_moe) on the CPU through
// JobRunner: random weights of a tiny MoE config train a drafter (the loss falls, the store
// empties, the drafter's exported layers are dense); the memory bound counts every expert's
// weights and the MoE block's buffers; precision = "fp8" trains too (experts in e4m3), and
// its bound counts the bf16 load beside the e4m3 form.
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

TEST(DFlashMoeJobTest, Fp8TrainsAndItsBoundCountsTheBf16Load) {
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
  model->max_tokens = 1;  // a workspace far below the weights: the load is the peak
  dflash::TargetModelSpec bf16 = *model;
  bf16.precision = models::TargetPrecision::kBf16;
  ASSERT_LT(dflash::TargetWeightBytes(*model), dflash::TargetWeightBytes(bf16));
  std::string what;
  EXPECT_EQ(dflash::TargetDeviceBytes(*model, &what),
            dflash::TargetWeightBytes(bf16) + dflash::TargetWeightBytes(*model));
  EXPECT_NE(what.find("while it loads"), std::string::npos) << what;
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
