#include "runtime/store/allocator.h"

#include <map>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace tandem {
namespace {

constexpr uint64_t kAlign = 256;

TEST(AllocatorTest, RoundsToAlignmentAndNeverOverlaps) {
  auto a = NewSegregatedFitAllocator(64 * kAlign, kAlign);
  std::vector<Allocation> got;
  for (uint64_t bytes : {1u, 255u, 256u, 257u, 1000u, 0u}) {
    std::optional<Allocation> x = a->Allocate(bytes);
    ASSERT_TRUE(x.has_value());
    EXPECT_EQ(x->offset % kAlign, 0u);
    EXPECT_EQ(x->size, std::max<uint64_t>(1, (bytes + kAlign - 1) / kAlign) * kAlign);
    for (const Allocation& g : got)
      EXPECT_TRUE(x->offset >= g.offset + g.size || g.offset >= x->offset + x->size);
    got.push_back(*x);
  }
  ASSERT_TRUE(a->CheckConsistency().ok());
  for (const Allocation& g : got) a->Free(g);
  EXPECT_EQ(a->Stats().used_bytes, 0u);
}

TEST(AllocatorTest, FreeCoalescesBackToOneBlock) {
  auto a = NewSegregatedFitAllocator(100 * kAlign, kAlign);
  std::vector<Allocation> got;
  while (auto x = a->Allocate(kAlign)) got.push_back(*x);
  EXPECT_EQ(got.size(), 100u);
  EXPECT_EQ(a->Stats().free_bytes, 0u);
  // Free every other block: 50 free blocks that cannot merge, so a 2-block request fails.
  for (size_t i = 0; i < got.size(); i += 2) a->Free(got[i]);
  AllocatorStats s = a->Stats();
  EXPECT_EQ(s.free_blocks, 50u);
  EXPECT_EQ(s.largest_free_block, kAlign);
  EXPECT_NEAR(s.fragmentation(), 0.98, 1e-9);  // 1 - 1/50
  EXPECT_FALSE(a->Allocate(2 * kAlign).has_value());
  for (size_t i = 1; i < got.size(); i += 2) a->Free(got[i]);
  s = a->Stats();
  EXPECT_EQ(s.free_blocks, 1u);
  EXPECT_EQ(s.largest_free_block, 100 * kAlign);
  EXPECT_TRUE(a->CheckConsistency().ok());
}

// A block whose size is not a bin boundary must still serve a request of exactly its size
// (the search rounds up a bin, then scans the request's own bin).
TEST(AllocatorTest, ExactFitOfWholeOddSizedArena) {
  for (uint64_t granules : {1u, 17u, 101u, 1000u, 4099u}) {
    auto a = NewSegregatedFitAllocator(granules * kAlign, kAlign);
    std::optional<Allocation> x = a->Allocate(granules * kAlign);
    ASSERT_TRUE(x.has_value()) << granules;
    EXPECT_FALSE(a->Allocate(1).has_value());
    a->Free(*x);
    EXPECT_FALSE(a->Allocate(granules * kAlign + 1).has_value());
  }
}

TEST(AllocatorTest, RandomAgainstReferenceModel) {
  constexpr uint64_t kCap = 1 << 20;
  auto a = NewSegregatedFitAllocator(kCap, kAlign);
  std::mt19937_64 rng(42);
  std::map<uint64_t, Allocation> live;  // offset -> allocation
  uint64_t used = 0;
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 100 < 55) {
      uint64_t bytes = 1 + rng() % (rng() % 8 == 0 ? 65536 : 2048);
      std::optional<Allocation> x = a->Allocate(bytes);
      if (!x) {
        EXPECT_LT(a->Stats().largest_free_block, bytes);  // refused only when nothing fits
        continue;
      }
      auto next = live.lower_bound(x->offset);
      if (next != live.end()) {
        ASSERT_LE(x->offset + x->size, next->first);
      }
      if (next != live.begin()) {
        auto prev = std::prev(next);
        ASSERT_LE(prev->first + prev->second.size, x->offset);
      }
      ASSERT_LE(x->offset + x->size, kCap);
      live[x->offset] = *x;
      used += x->size;
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      a->Free(it->second);
      used -= it->second.size;
      live.erase(it);
    }
    ASSERT_EQ(a->Stats().used_bytes, used);
    if (step % 1000 == 0) {
      ASSERT_TRUE(a->CheckConsistency().ok()) << step;
    }
  }
  for (auto& [off, x] : live) a->Free(x);
  AllocatorStats s = a->Stats();
  EXPECT_EQ(s.free_blocks, 1u);
  EXPECT_EQ(s.largest_free_block, kCap);
  EXPECT_TRUE(a->CheckConsistency().ok());
}

}  // namespace
}  // namespace tandem
