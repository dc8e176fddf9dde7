// checkpoint.keep_last: which step directories ApplyRetention removes, and which it never does
// (the one `latest` names, the one DIR/best names, newer or incomplete steps, other files).
#include "actors/dflash/checkpoint/checkpoint_retention.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "actors/dflash/checkpoint/checkpoint_state.h"
#include "tests/support/scratch_dir.h"

namespace tandem::dflash {
namespace {

namespace fs = std::filesystem;

class RetentionTest : public ::testing::Test {
 protected:
  // A step directory; complete ones have a tandem_state.json.
  void Step(int64_t step, bool complete = true) {
    const fs::path p = dir_ / StepDirName(step);
    fs::create_directories(p);
    std::ofstream(p / "model.safetensors") << "weights";
    if (complete) std::ofstream(p / "tandem_state.json") << "{}";
  }
  void Pointer(const char* name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  std::set<std::string> Left() const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.insert(e.path().filename().string());
    return out;
  }

  const ::tandem::testing::ScratchDir scratch_;  // unique per process and test
  const fs::path dir_ = scratch_.path();
};

TEST_F(RetentionTest, KeepsTheNewestLatestAndBestRemovesTheRest) {
  for (int64_t s : {10, 20, 30, 40, 50, 60}) Step(s);
  Step(5, /*complete=*/false);  // an interrupted write: cleanup's, not retention's
  Step(70);                     // newer than latest: never touched
  fs::create_directories(dir_ / "previous-20260101T000000Z");
  Pointer("latest", "step_00000060\n");
  Pointer("best", R"({"dir": "step_00000020", "step": 20, "tau": 2.5, "prompts": 4})" "\n");
  auto removed = ApplyRetention(dir_.string(), 2);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(std::set<std::string>(removed->begin(), removed->end()),
            (std::set<std::string>{(dir_ / "step_00000010").string(),
                                   (dir_ / "step_00000030").string(),
                                   (dir_ / "step_00000040").string()}));
  EXPECT_EQ(Left(), (std::set<std::string>{"step_00000005", "step_00000020", "step_00000050",
                                           "step_00000060", "step_00000070", "latest", "best",
                                           "previous-20260101T000000Z"}));
  // Applying it again removes nothing more.
  removed = ApplyRetention(dir_.string(), 2);
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(removed->empty());
}

TEST_F(RetentionTest, NeverRemovesTheStepLatestNamesEvenWithKeepLastOne) {
  for (int64_t s : {10, 20, 30}) Step(s);
  Pointer("latest", "step_00000020\n");  // an older step than the newest on disk
  auto removed = ApplyRetention(dir_.string(), 1);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(Left(), (std::set<std::string>{"step_00000020", "step_00000030", "latest"}));
}

TEST_F(RetentionTest, KeepLastZeroOrNoLatestRemovesNothing) {
  for (int64_t s : {10, 20, 30}) Step(s);
  auto removed = ApplyRetention(dir_.string(), 1);  // no `latest` yet
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(removed->empty());
  Pointer("latest", "step_00000030\n");
  removed = ApplyRetention(dir_.string(), 0);
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(removed->empty());
  EXPECT_EQ(Left().size(), 4u);
}

TEST_F(RetentionTest, AGarbledBestPointerRemovesNothingAndSaysWhy) {
  for (int64_t s : {10, 20, 30}) Step(s);
  Pointer("latest", "step_00000030\n");
  Pointer("best", "step_2O\n");
  auto removed = ApplyRetention(dir_.string(), 1);
  ASSERT_FALSE(removed.ok());
  EXPECT_NE(removed.status().message().find("/best: not a best-checkpoint record"),
            std::string::npos)
      << removed.status().ToString();
  EXPECT_EQ(Left().size(), 5u);
}

}  // namespace
}  // namespace tandem::dflash
