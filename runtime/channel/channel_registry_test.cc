#include "runtime/channel/channel_registry.h"

#include <string>

#include <gtest/gtest.h>

namespace tandem {
namespace {

using namespace std::chrono_literals;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(ChannelRegistryTest, DeclareThenOpenTyped) {
  ChannelRegistry reg;
  ASSERT_TRUE(reg.Declare("hidden", {.capacity = 4, .min_ready = 2}).ok());
  auto a = reg.Open<int>("hidden");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = reg.Open<int>("hidden");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->get(), b->get()) << "one channel per name";
  EXPECT_EQ((*a)->options().min_ready, 2u);
  ASSERT_TRUE((*a)->Push(5).ok());
  EXPECT_EQ(reg.Snapshot()[0].depth, 1u);
}

TEST(ChannelRegistryTest, TypeMismatchNamesBothTypes) {
  ChannelRegistry reg;
  ASSERT_TRUE(reg.Create<int>("c", {.capacity = 1}).ok());
  auto wrong = reg.Open<std::string>("c");
  ASSERT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(wrong.status().message(), "carries int")) << wrong.status().message();
  EXPECT_TRUE(Contains(wrong.status().message(), "std::")) << wrong.status().message();
}

TEST(ChannelRegistryTest, ErrorsNameTheProblem) {
  ChannelRegistry reg;
  ASSERT_TRUE(reg.Declare("a", {.capacity = 1}).ok());
  ASSERT_TRUE(reg.Declare("b", {.capacity = 1}).ok());
  auto missing = reg.Open<int>("hiden");
  ASSERT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(missing.status().message(), "declared: [a, b]"))
      << missing.status().message();
  EXPECT_EQ(reg.Declare("a", {.capacity = 1}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.Declare("c", {.capacity = 1, .min_ready = 2}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.Declare("", {.capacity = 1}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.Names(), (std::vector<std::string>{"a", "b"}));
}

TEST(ChannelRegistryTest, SnapshotCoversOpenedAndDeclared) {
  ChannelRegistry reg;
  ASSERT_TRUE(reg.Declare("unopened", {.capacity = 3, .min_ready = 1}).ok());
  auto ch = reg.Create<double>("opened", {.capacity = 2, .min_ready = 1});
  ASSERT_TRUE(ch.ok());
  ASSERT_TRUE((*ch)->Push(1.5).ok());
  auto snap = reg.Snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].name, "opened");
  EXPECT_EQ(snap[0].item_type, "double");
  EXPECT_EQ(snap[0].depth, 1u);
  EXPECT_EQ(snap[1].name, "unopened");
  EXPECT_EQ(snap[1].capacity, 3u);
  EXPECT_EQ(snap[1].item_type, "");
  EXPECT_TRUE(Contains(FormatChannelStats(snap[0]), "opened: depth 1/2 min_ready 1"))
      << FormatChannelStats(snap[0]);
}

TEST(ChannelRegistryTest, CloseAllClosesLaterOpensToo) {
  ChannelRegistry reg;
  ASSERT_TRUE(reg.Declare("late", {.capacity = 1}).ok());
  auto early = reg.Create<int>("early", {.capacity = 1});
  ASSERT_TRUE(early.ok());
  reg.CloseAll();
  EXPECT_EQ((*early)->Push(1).code(), StatusCode::kUnavailable);
  auto late = reg.Open<int>("late");
  ASSERT_TRUE(late.ok());
  EXPECT_EQ((*late)->Push(1).code(), StatusCode::kUnavailable);
  EXPECT_EQ((*late)->PopFor(1ms).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tandem
