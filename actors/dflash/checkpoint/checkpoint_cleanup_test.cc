// What a kill -9 during a checkpoint leaves behind is cleaned at the next start, and nothing
// complete (least of all what `latest` names) is touched.
#include "actors/dflash/checkpoint/checkpoint_cleanup.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace tandem::dflash {
namespace {

namespace fs = std::filesystem;

void Touch(const fs::path& p) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << "x";
}

int DeadPid() {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

TEST(CheckpointCleanupTest, RemovesIncompleteStepsAndStaleTempsOnly) {
  char tmpl[] = "/tmp/tandem-ck-XXXXXX";
  const fs::path dir = ::mkdtemp(tmpl);
  const int dead = DeadPid();
  const std::string live = std::to_string(::getpid());
  Touch(dir / "step_00000020" / "tandem_state.json");  // complete, older
  Touch(dir / "step_00000020" / "model.safetensors");
  Touch(dir / "step_00000040" / "model.safetensors");  // latest: kept even though incomplete
  Touch(dir / "step_00000060" / "model.safetensors");  // killed mid-write: incomplete
  Touch(dir / "step_00000060" / ("config.json.tmp." + std::to_string(dead)));
  Touch(dir / "step_00000080" / "tandem_state.json");  // complete, newer than latest
  Touch(dir / "step_00000080" / ("model.safetensors.tmp." + std::to_string(dead)));
  Touch(dir / "step_00000080" / ("model.safetensors.tmp." + live));  // a live writer's
  Touch(dir / "latest.tmp");
  Touch(dir / "notes.txt");
  std::ofstream(dir / "latest") << "step_00000040\n";

  auto removed = CleanCheckpointDir(dir.string());
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  std::vector<std::string> got = *removed;
  std::sort(got.begin(), got.end());
  std::vector<std::string> want = {
      (dir / "latest.tmp").string(),
      (dir / "step_00000060").string(),
      (dir / "step_00000080" / ("model.safetensors.tmp." + std::to_string(dead))).string()};
  EXPECT_EQ(got, want);
  EXPECT_TRUE(fs::exists(dir / "step_00000020" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "step_00000040" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "step_00000080" / ("model.safetensors.tmp." + live)));
  EXPECT_TRUE(fs::exists(dir / "notes.txt"));
  EXPECT_TRUE(fs::exists(dir / "latest"));

  auto again = CleanCheckpointDir(dir.string());  // nothing left to clean
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
  EXPECT_TRUE(CleanCheckpointDir((dir / "missing").string())->empty());
  EXPECT_TRUE(CleanCheckpointDir("")->empty());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tandem::dflash
