// Test support for store tests: a fixture that opens a store with a fake copy engine and, at
// tear-down of every test, asserts zero live objects and zero leaked bytes (and that all
// free space has coalesced back into one block). Test-only; never include from library code.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/store/fake_copy_engine.h"
#include "runtime/store/object_store.h"

namespace tandem {

// OK when `store` holds no objects, no bytes and no pending copies, and its free space is one
// block; otherwise an error that carries the store's stats.
inline Status CheckNoLeaks(ObjectStore& store) {
  store.PollFences();
  RETURN_IF_ERROR(store.CheckConsistency());
  StoreStats s = store.Stats();
  if (s.live_objects != 0 || s.bytes_used != 0 || s.inflight_copies != 0 ||
      s.allocator.free_bytes != s.capacity || s.allocator.largest_free_block != s.capacity) {
    return InternalError("store leaked: {}", s.ToString());
  }
  return Status::Ok();
}

class StoreTest : public ::testing::Test {
 protected:
  // Tests call this first. CPU tests use host pages even where a GPU is present; GPU tests
  // pass ArenaBacking::kAuto to get a cudaHostAlloc arena.
  void OpenStore(StoreOptions options, ArenaBacking backing = ArenaBacking::kHostPages) {
    options.backing = backing;
    Result<std::unique_ptr<ObjectStore>> store = ObjectStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }

  // Completes copies still pending on engine_ (into Scratch() buffers, still alive here).
  void TearDown() override {
    if (store_ == nullptr) return;
    engine_.CompleteAll();
    Status s = CheckNoLeaks(*store_);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (s.ok()) {
      store_.reset();
    } else {
      (void)store_.release();  // destroying a store with live objects would abort the run
    }
  }

  // A zeroed buffer that lives until after TearDown, so copies into it that a failing test
  // left pending complete into valid memory.
  uint8_t* Scratch(size_t bytes) {
    scratch_.push_back(std::make_unique<uint8_t[]>(bytes));
    return scratch_.back().get();
  }

  std::vector<std::unique_ptr<uint8_t[]>> scratch_;
  FakeCopyEngine engine_;
  std::unique_ptr<ObjectStore> store_;
};

}  // namespace tandem
