// Test helpers for models/ tests: a scratch directory removed at tear-down, and raw file
// writes for building deliberately corrupt checkpoints. Test-only; not part of the library.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "tests/support/scratch_dir.h"

namespace tandem::models::testing {

// A scratch directory unique per process and instance (tests/support/scratch_dir.h).
using ::tandem::testing::ScratchDir;

inline void WriteRaw(const std::string& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << path;
}

inline std::string ReadRaw(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace tandem::models::testing
