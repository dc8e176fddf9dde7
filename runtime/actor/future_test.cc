#include "runtime/actor/future.h"

#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace tandem {
namespace {

using namespace std::chrono_literals;

TEST(FutureTest, GetBlocksUntilSetFromAnotherThread) {
  Promise<int> p;
  Future<int> f = p.GetFuture();
  EXPECT_FALSE(f.ready());
  std::thread t([p = std::move(p)]() mutable { p.Set(42); });
  Result<int> r = f.Get();
  t.join();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 42);
  EXPECT_FALSE(f.valid());
}

TEST(FutureTest, GetForTimesOutThenStillDelivers) {
  Promise<std::string> p;
  Future<std::string> f = p.GetFuture();
  Result<std::string> r = f.GetFor(5ms);
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(f.valid());
  p.Set(std::string("late"));
  EXPECT_TRUE(f.ready());
  r = f.GetFor(1s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "late");
}

TEST(FutureTest, ErrorsTravelAsStatus) {
  Promise<int> p;
  Future<int> f = p.GetFuture();
  p.Set(UnavailableError("peer gone"));
  Result<int> r = f.Get();
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message(), "peer gone");
}

TEST(FutureTest, DroppedPromiseCancels) {
  Future<Unit> f;
  {
    Promise<Unit> p;
    f = p.GetFuture();
  }
  EXPECT_EQ(f.Get().status().code(), StatusCode::kCancelled);
}

TEST(FutureTest, ThenOnReadyFutureRunsAtOnce) {
  Future<int> f = Future<int>::Ready(20);
  std::thread::id ran_on;
  Future<std::string> g = f.Then([&](Result<int> r) {
    ran_on = std::this_thread::get_id();
    return std::to_string(*r + 1);
  });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_FALSE(f.valid());
  EXPECT_EQ(*g.Get(), "21");
}

TEST(FutureTest, ThenRunsOnSettingThreadAndChains) {
  Promise<int> p;
  Future<int> f = p.GetFuture();
  std::thread::id ran_on;
  Future<int> doubled = f.Then([&](Result<int> r) -> Result<int> {
    ran_on = std::this_thread::get_id();
    if (!r.ok()) return r.status();
    return *r * 2;
  });
  Future<Unit> checked = doubled.Then([](Result<int> r) -> Status {
    if (!r.ok()) return r.status();
    return *r == 14 ? Status::Ok() : InternalError("got {}", *r);
  });
  EXPECT_FALSE(checked.ready());
  std::thread setter([p = std::move(p)]() mutable { p.Set(7); });
  std::thread::id setter_id = setter.get_id();
  setter.join();
  EXPECT_EQ(ran_on, setter_id);
  EXPECT_TRUE(checked.Get().ok());
}

TEST(FutureTest, ThenSeesErrorsAndCatchesThrows) {
  Future<int> failed = Future<int>::Ready(NotFoundError("no such thing"));
  Future<bool> saw = failed.Then([](Result<int> r) { return r.status().code() == StatusCode::kNotFound; });
  EXPECT_TRUE(*saw.Get());

  Future<Unit> thrown = Future<int>::Ready(1).Then([](Result<int>) -> void {
    throw std::runtime_error("bad continuation");
  });
  Result<Unit> r = thrown.Get();
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("bad continuation"), std::string::npos);
}

TEST(FutureTest, MoveOnlyValues) {
  Promise<std::unique_ptr<int>> p;
  Future<std::unique_ptr<int>> f = p.GetFuture();
  p.Set(std::make_unique<int>(5));
  Result<std::unique_ptr<int>> r = f.Get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(**r, 5);
}

}  // namespace
}  // namespace tandem
