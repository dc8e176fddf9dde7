// The tiny job with drafter_type = "dflash2" end to end on the CPU through JobRunner: the
// DFlash2 drafter (3-tap convolutions, the candidate selector, multiplier, soft cap and an
// input embedding scale) trains, its logged loss stays finite and falls, and its checkpoint
// is a DFlash2DraftModel: config.json names the architecture and carries the DFlash2 keys,
// model.safetensors holds the convolutions' and the selector's tensors at their shapes, the
// successor codebook (0 at init) trained.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/dflash/checkpoint/checkpoint_state.h"
#include "actors/dflash/job_test_util.h"
#include "models/io/safetensors.h"

namespace tandem {
namespace {

using dflash::testing::FreshDir;

// The logged losses of a metrics file (one record every log_every steps).
std::vector<double> Losses(const std::string& path) {
  std::vector<double> out;
  std::ifstream f(path);
  std::string line;
  const std::regex re("\"loss\": ([^,}]+)");  // a number, or nan / inf as fmt writes them
  for (std::smatch m; std::getline(f, line);)
    if (std::regex_search(line, m, re)) out.push_back(std::strtod(m[1].str().c_str(), nullptr));
  return out;
}

constexpr const char* kDFlash2Keys =
    "drafter_type = \"dflash2\"\n"
    "conv_kernel_size = 3\n"
    "conv_group_size = 8\n"
    "selector_rank = 16\n"
    "selector_top_k = 8\n"
    "output_multiplier = 0.8\n"
    "final_logit_softcapping = 20.0\n"
    "input_embedding_scale = 1.5\n"
    "selector_loss_weight = 0.5\n";

TEST(DFlash2JobTest, TrainsAndCheckpointsADFlash2Drafter) {
  const std::string dir = FreshDir("dflash2_train");
  auto report = dflash::testing::RunJob(
      {.name = "tiny-dflash2",
       .max_steps = 200,
       .checkpoint_dir = dir,
       .checkpoint_every = 100,
       .drafter_extra = fmt::format("metrics_file = \"{}/metrics.jsonl\"\n{}", dir, kDFlash2Keys)});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_TRUE(report->status.ok()) << report->ToString();
  EXPECT_EQ(report->store.live_objects, 0u) << report->ToString();

  const std::vector<double> losses = Losses(dir + "/metrics.jsonl");
  ASSERT_EQ(losses.size(), 20u);
  for (double l : losses) ASSERT_TRUE(std::isfinite(l)) << fmt::format("{}", fmt::join(losses, " "));
  // As in the DFlash job test: the next tokens are a fixed function of the anchor (5% noise),
  // so a drafter that learns drops well below its first logged loss. One logged step's loss
  // swings by +-15% here, so the last five logs are averaged.
  double last = 0;
  for (size_t i = losses.size() - 5; i < losses.size(); ++i) last += losses[i] / 5;
  EXPECT_LT(last, 0.75 * losses.front()) << fmt::format("{}", fmt::join(losses, " "));

  auto state = dflash::ReadLatestState(dir);
  ASSERT_TRUE(state.ok() && state->has_value());
  EXPECT_EQ((*state)->step, 200);
  const std::string ckpt = (*state)->path;
  std::ifstream cf(ckpt + "/config.json");
  ASSERT_TRUE(cf.good()) << ckpt;
  const nlohmann::json config = nlohmann::json::parse(cf);
  EXPECT_EQ(config.at("architectures"), nlohmann::json::array({"DFlash2DraftModel"}));
  const nlohmann::json& dc = config.at("dflash_config");
  EXPECT_EQ(dc.at("conv_kernel_size"), 3);
  EXPECT_EQ(dc.at("selector_rank"), 16);
  EXPECT_DOUBLE_EQ(dc.at("input_embedding_scale").get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(dc.at("final_logit_softcapping").get<double>(), 20.0);

  auto weights = models::SafetensorsReader::Open(ckpt + "/model.safetensors");
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  const int64_t h = 64, v = 128;  // the tiny target's hidden size and vocab
  const std::vector<std::pair<std::string, std::vector<int64_t>>> want = {
      {"candidate_selector.hidden_projection.weight", {16, h}},
      {"candidate_selector.predecessor_codebook", {v, 16}},
      {"candidate_selector.successor_codebook", {v, 16}},
      {"layers.0.attention_conv.base_kernel", {2, 3, h}},
      {"layers.0.mlp_conv.kernel_projection.weight", {2 * 3 * (h / 8), h}}};
  for (const auto& [name, shape] : want) {
    const models::TensorInfo* t = weights->Find(name);
    ASSERT_NE(t, nullptr) << name << " missing from " << ckpt;
    EXPECT_EQ(t->shape, shape) << name;
  }
  // The successor codebook starts at 0 and only the selector loss moves it: nonzero after
  // training means the selector's gradient reached the optimizer.
  const models::TensorInfo* succ = weights->Find("candidate_selector.successor_codebook");
  std::vector<float> values(succ->numel());
  ASSERT_TRUE(weights->Read(*succ, models::DType::kF32, values.data(),
                            static_cast<int64_t>(values.size() * sizeof(float))).ok());
  EXPECT_TRUE(std::any_of(values.begin(), values.end(), [](float x) { return x != 0.0f; }));
}

}  // namespace
}  // namespace tandem
