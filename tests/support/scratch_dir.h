// A test's scratch directory, unique to this process and this instance, removed at tear-down.
// Test-only (needs GoogleTest); header-only so any test, from runtime/ up, can use it.
//
// Why not a fixed name under ::testing::TempDir() or $TMPDIR: ctest gives each test its own
// TMPDIR, but a direct run of a test binary (or two checkouts, or a sanitizer build beside the
// plain one) shares one, and two processes that remove_all and rewrite the same fixed name
// break each other mid-test. The name here holds the test's name, so a leftover is
// easy to trace, and is made by mkdtemp, so no other process or instance can hold it.
// Thread-safety: one instance per thread; construction from several threads at once is safe.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include <gtest/gtest.h>

namespace tandem::testing {

class ScratchDir {
 public:
  // Makes <temp_directory_path()>/tandem_<label or current test name>_XXXXXX.
  explicit ScratchDir(std::string_view label = {}) {
    std::string name(label);
    if (name.empty()) {
      const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
      name = info ? std::string(info->test_suite_name()) + "." + info->name() : "test";
    }
    std::replace(name.begin(), name.end(), '/', '_');  // parameterized tests: "Case/0"
    std::string tmpl =
        (std::filesystem::temp_directory_path() / ("tandem_" + name + "_XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp(" << tmpl << ") failed";
    }
    path_ = tmpl;
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }

  std::string path() const { return path_.string(); }
  // `name` inside the directory (not created).
  std::string File(std::string_view name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace tandem::testing
