// Concurrency stress for the store: 8 threads doing put / get / release / copy on shared
// slots, with every object's bytes checked on each read and every copy's destination checked
// when its fence completes (a freed-and-reused source would show up as wrong bytes).
// TANDEM_STORE_STRESS_OPS sets the total operation count (default 1,000,000).
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/store/store_test_fixture.h"

namespace tandem {
namespace {

constexpr int kThreads = 8;
constexpr int kSlots = 64;
constexpr uint64_t kMaxObject = 1024;
constexpr int kMaxPendingPerThread = 8;

uint8_t PatternByte(uint64_t seed, uint64_t i) {
  return static_cast<uint8_t>((seed >> (i % 8 * 8)) + i * 13);
}

void Fill(uint8_t* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = 0; i < n; ++i) p[i] = PatternByte(seed, i);
}

bool Intact(const uint8_t* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = 0; i < n; ++i)
    if (p[i] != PatternByte(seed, i)) return false;
  return true;
}

struct Slot {
  std::mutex mu;
  ObjectRef ref;  // held as a "channel" ref while in the slot
  uint64_t seed = 0;
};

struct PendingCopy {
  std::shared_ptr<const CopyFence> fence;
  std::vector<uint8_t> dst;
  uint64_t seed;
};

uint64_t TotalOps() {
  const char* env = std::getenv("TANDEM_STORE_STRESS_OPS");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 1'000'000;
}

TEST_F(StoreTest, EightThreadsMillionOps) {
  StoreOptions o;
  // Holds every slot, every pending copy and every object in hand at the largest size
  // ((64 + 8 * 8 + 8) KiB) with room to spare, so a Create never waits forever.
  o.capacity_bytes = 512 << 10;
  OpenStore(o);
  const uint64_t ops_per_thread = (TotalOps() + kThreads - 1) / kThreads;
  std::vector<Slot> slots(kSlots);
  std::atomic<uint64_t> next_seed{1}, copies_checked{0}, reads_checked{0}, failures{0};

  auto worker = [&](int t) {
    std::mt19937_64 rng(1000 + t);
    std::vector<PendingCopy> pending;
    auto reap = [&](bool all) {
      for (size_t i = 0; i < pending.size();) {
        if (!all && !pending[i].fence->IsComplete()) {
          ++i;
          continue;
        }
        if (!pending[i].fence->Wait(std::chrono::seconds(30)).ok() ||
            !Intact(pending[i].dst.data(), pending[i].dst.size(), pending[i].seed)) {
          ++failures;
          ADD_FAILURE() << "copy destination has wrong bytes";
        }
        ++copies_checked;
        pending[i] = std::move(pending.back());
        pending.pop_back();
      }
    };
    auto take = [&](Slot& s, uint64_t* seed) {
      std::lock_guard<std::mutex> lock(s.mu);
      *seed = s.seed;
      ObjectRef r = s.ref;  // a new local ref
      return r;
    };
    for (uint64_t op = 0; op < ops_per_thread; ++op) {
      Slot& slot = slots[rng() % kSlots];
      const int kind = static_cast<int>(rng() % 10);
      if (kind < 3) {  // put
        const uint64_t bytes = 1 + rng() % kMaxObject;
        const uint64_t seed = next_seed.fetch_add(1) * 0x9E3779B97F4A7C15ull;
        Result<MutableObject> obj = store_->Create(bytes, t % 2 ? "odd" : "even",
                                                   std::chrono::seconds(30));
        if (!obj.ok()) {
          ADD_FAILURE() << obj.status().ToString();
          return;
        }
        Fill(obj->data(), bytes, seed);
        ObjectRef ref = obj->Seal();
        ref.SetHolder(HolderKind::kChannel);
        std::lock_guard<std::mutex> lock(slot.mu);
        std::swap(slot.ref, ref);
        slot.seed = seed;
      } else if (kind < 6) {  // get: read and check the bytes
        uint64_t seed;
        ObjectRef r = take(slot, &seed);
        if (r) {
          if (!Intact(r.data(), r.size(), seed)) {
            ++failures;
            ADD_FAILURE() << "read of " << r.id().ToString() << " found wrong bytes";
          }
          ++reads_checked;
        }
      } else if (kind < 8) {  // release
        ObjectRef r;
        {
          std::lock_guard<std::mutex> lock(slot.mu);
          std::swap(r, slot.ref);
        }
        if (r) r.SetHolder(HolderKind::kLocal);
      } else {  // copy out, drop our ref at once, check the destination later
        uint64_t seed;
        ObjectRef r = take(slot, &seed);
        if (r) {
          PendingCopy p{nullptr, std::vector<uint8_t>(r.size()), seed};
          Result<std::shared_ptr<const CopyFence>> f =
              store_->CopyOut(r, 0, p.dst.data(), r.size(), engine_);
          if (!f.ok()) {
            ADD_FAILURE() << f.status().ToString();
            return;
          }
          p.fence = std::move(f).value();
          pending.push_back(std::move(p));
        }
        if (rng() % 2 == 0) engine_.CompleteOldest();  // possibly another thread's copy
        if (pending.size() >= kMaxPendingPerThread) {
          while (!pending.front().fence->IsComplete()) engine_.CompleteOldest();
        }
        reap(false);
      }
      if (t == 0 && op % 4096 == 0) {
        StoreStats s = store_->Stats();
        if (s.bytes_used > s.capacity || s.high_water > s.capacity) ++failures;
      }
    }
    engine_.CompleteAll();
    reap(true);
  };

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  for (Slot& s : slots) s.ref.Reset();

  EXPECT_EQ(failures.load(), 0u);
  EXPECT_GT(reads_checked.load(), ops_per_thread);
  EXPECT_GT(copies_checked.load(), ops_per_thread / 10);
  StoreStats s = store_->Stats();
  std::printf("%d threads x %llu ops: %llu creates, %llu reads, %llu copies checked, "
              "high-water %llu bytes, %llu creates waited\n",
              kThreads, static_cast<unsigned long long>(ops_per_thread),
              static_cast<unsigned long long>(s.creates),
              static_cast<unsigned long long>(reads_checked.load()),
              static_cast<unsigned long long>(copies_checked.load()),
              static_cast<unsigned long long>(s.high_water),
              static_cast<unsigned long long>(s.create_waits));
  EXPECT_GT(s.creates, ops_per_thread);
  EXPECT_LE(s.high_water, s.capacity);
  // Zero live objects and zero leaked bytes are checked by the fixture's tear-down.
}

}  // namespace
}  // namespace tandem
