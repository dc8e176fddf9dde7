// SyncDir: a real directory syncs; a missing one and a regular file are refused with errors
// that name the path.
#include "runtime/core/file_sync.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace tandem {
namespace {

namespace fs = std::filesystem;

std::string Scratch(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  fs::path dir = fs::path(tmp != nullptr ? tmp : fs::temp_directory_path().string()) /
                 ("file_sync_test_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

TEST(SyncDirTest, SyncsADirectory) {
  const std::string dir = Scratch("ok");
  std::ofstream(dir + "/a") << "x";
  EXPECT_TRUE(SyncDir(dir).ok());
}

TEST(SyncDirTest, RefusesAMissingDirectoryAndAFileNamingThem) {
  const std::string dir = Scratch("bad");
  Status missing = SyncDir(dir + "/nope");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound) << missing.ToString();
  EXPECT_NE(missing.message().find(dir + "/nope"), std::string::npos) << missing.ToString();
  std::ofstream(dir + "/file") << "x";
  Status file = SyncDir(dir + "/file");
  EXPECT_EQ(file.code(), StatusCode::kInvalidArgument) << file.ToString();
  EXPECT_NE(file.message().find("Not a directory"), std::string::npos) << file.ToString();
}

}  // namespace
}  // namespace tandem
