#include "runtime/sched/resources.h"

#include <cstdlib>

#include <gtest/gtest.h>

namespace tandem::sched {
namespace {

// Sets an environment variable for the scope of one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    if (old != nullptr) old_ = old;
    had_ = old != nullptr;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(ResourcesTest, FakeGpusFromEnvironment) {
  ScopedEnv gpus("TANDEM_FAKE_GPUS", "3");
  ScopedEnv pinned("TANDEM_PINNED_BYTES", "4096");
  Result<NodeResources> r = DiscoverResources();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->gpus.size(), 3u);
  EXPECT_TRUE(r->fake_gpus());
  EXPECT_EQ(r->gpus[2].index, 2);
  EXPECT_EQ(r->pinned_bytes, 4096u);
  EXPECT_GE(r->cpu_slots, 1);
  EXPECT_NE(r->ToString().find("3 GPUs (fake-gpu 80.0 GiB ×3)"), std::string::npos)
      << r->ToString();
}

TEST(ResourcesTest, MalformedOverridesAreErrors) {
  ScopedEnv gpus("TANDEM_FAKE_GPUS", "two");
  Result<NodeResources> r = DiscoverResources();
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "TANDEM_FAKE_GPUS='two' is not a non-negative integer");
}

TEST(ResourcesTest, RealDiscoveryWorksWithOrWithoutDevices) {
  unsetenv("TANDEM_FAKE_GPUS");
  Result<NodeResources> r = DiscoverResources();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->fake_gpus());
  for (size_t i = 0; i < r->gpus.size(); ++i) {
    EXPECT_EQ(r->gpus[i].index, static_cast<int>(i));
    EXPECT_GT(r->gpus[i].memory_bytes, 0u);
  }
}

}  // namespace
}  // namespace tandem::sched
