// Checks the hot-path promise: once a stage exists, recording into it (through a handle, by
// name, or with a scoped timer) never allocates. This binary replaces the global operator
// new with one that counts calls.
#include <atomic>
#include <cstdlib>
#include <new>

#include <gtest/gtest.h>

#include "runtime/profile/profile_stats.h"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  ++g_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace tandem {
namespace {

TEST(ProfileAllocTest, RecordingIntoExistingStagesDoesNotAllocate) {
  ProfileStats prof;
  StageHandle h = prof.Stage("drafter.forward");
  prof.Stage("target.pack_hidden_states_into_store");  // longer than any small-string buffer
  const long before = g_allocations.load();
  for (int i = 0; i < 1000; ++i) {
    h.Record(i * 1000);
    prof.Record("target.pack_hidden_states_into_store", i);
    auto t = prof.Scope(h);
    auto u = prof.Scope("drafter.forward");
  }
  EXPECT_EQ(g_allocations.load() - before, 0);
  // The counter works: creating a stage allocates.
  prof.Stage("new.stage");
  EXPECT_GT(g_allocations.load() - before, 0);
}

}  // namespace
}  // namespace tandem
