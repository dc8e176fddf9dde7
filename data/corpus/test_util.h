// Helpers for the data tests: a scratch directory removed at the end, writing files, and the
// checksums of what a batch source yields.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "data/corpus/token_batch.h"

namespace tandem::data::testing {

class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            (std::string("tandem_data_") + info->test_suite_name() + "_" + info->name() + "_" +
             std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  std::string Path(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// The checksum of each batch `src` yields, until it ends or `limit` batches.
inline std::vector<uint64_t> Sums(BatchSource& src, int limit = 100000) {
  std::vector<uint64_t> out;
  for (int i = 0; i < limit; ++i) {
    auto b = src.Next();
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok() || !b->has_value()) break;
    out.push_back((*b)->Checksum());
  }
  return out;
}

}  // namespace tandem::data::testing
