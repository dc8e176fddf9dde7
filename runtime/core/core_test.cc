#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/core/clock.h"
#include "runtime/core/logging.h"
#include "runtime/core/status.h"

namespace tandem {
namespace {

Result<int> ParsePositive(int v) {
  if (v <= 0) return InvalidArgumentError("value {} is not positive", v);
  return v * 2;
}

Status UseParse(int v, int* out) {
  ASSIGN_OR_RETURN(*out, ParsePositive(v));
  return Status::Ok();
}

Status Chain(int v) {
  int x = 0;
  RETURN_IF_ERROR(UseParse(v, &x));
  return x == 2 * v ? Status::Ok() : InternalError("wrong");
}

TEST(StatusTest, CodesAndMessages) {
  Status s = NotFoundError("actor '{}' not found", "drafter");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NotFound: actor 'drafter' not found");
  EXPECT_EQ(s.WithContext("job.toml").message(), "job.toml: actor 'drafter' not found");
  EXPECT_TRUE(Status::Ok().ok());
  EXPECT_EQ(Status::Ok().ToString(), "OK");
}

TEST(StatusTest, ResultPropagation) {
  EXPECT_TRUE(Chain(3).ok());
  Status bad = Chain(-1);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("-1"), std::string::npos);
  Result<int> r = ParsePositive(5);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 10);
}

TEST(StatusDeathTest, ValueOfErrorAborts) {
  Result<int> r = ParsePositive(0);
  EXPECT_DEATH((void)r.value(), "not positive");
}

TEST(LoggingTest, PrefixLevelAndSink) {
  std::vector<std::string> lines;
  log::SetSink([&](log::Level, std::string_view l) { lines.emplace_back(l); });
  log::SetThreadPrefix("drafter/0");
  TLOG_INFO("step {}", 7);
  TLOG_DEBUG("hidden");
  log::SetThreadPrefix("");
  log::SetSink(nullptr);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("[drafter/0] step 7"), std::string::npos);
  EXPECT_EQ(lines[0][0], 'I');
}

TEST(ClockTest, FormatBytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(3ull << 29), "1.5 GiB");
}

}  // namespace
}  // namespace tandem
