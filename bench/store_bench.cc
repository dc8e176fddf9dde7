// tandem-bench store: throughput of put+seal+release on the ObjectStore and its allocation
// latency (p50/p99) at 1, 4 and 16 threads, next to malloc/free and, when a GPU is present,
// cudaHostAlloc/cudaFreeHost per object, in the same run and printed as ratios.
//
//   tandem-bench store [--bytes N] [--ops N] [--threads 1,4,16]
//
// --ops is per thread (default 1,000,000 for the store and malloc; cudaHostAlloc runs
// --ops/500 since each call takes milliseconds). Every op writes the whole object, so the
// comparison includes touching the memory. Allocation latency is sampled on every 8th op.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench.h"
#include "runtime/core/clock.h"
#include "runtime/store/object_store.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tandem::bench {
namespace {

struct RunResult {
  double ops_per_s = 0;
  double p50_ns = 0;
  double p99_ns = 0;
  bool ok = true;
};

// Runs `op(thread, i, sample)` ops_per_thread times on each of `threads` threads; op returns
// the allocation latency in ns when `sample` is set (0 otherwise) or a negative on failure.
template <typename Op>
RunResult Run(int threads, uint64_t ops_per_thread, Op op) {
  std::vector<std::vector<double>> samples(threads);
  std::vector<int> failed(threads, 0);
  std::vector<std::thread> pool;
  const TimePoint start = SteadyClock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      samples[t].reserve(ops_per_thread / 8 + 1);
      for (uint64_t i = 0; i < ops_per_thread; ++i) {
        const bool sample = (i & 7) == 0;
        double ns = op(t, sample);
        if (ns < 0) {
          failed[t] = 1;
          return;
        }
        if (sample) samples[t].push_back(ns);
      }
    });
  }
  for (auto& th : pool) th.join();
  const double seconds = SecondsSince(start);
  RunResult r;
  r.ops_per_s = static_cast<double>(ops_per_thread) * threads / seconds;
  std::vector<double> all;
  for (auto& s : samples) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  if (!all.empty()) {
    r.p50_ns = all[all.size() / 2];
    r.p99_ns = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  }
  r.ok = std::count(failed.begin(), failed.end(), 1) == 0;
  return r;
}

double NowNs() { return static_cast<double>(NowNanos()); }

std::vector<int> ParseThreads(const std::string& s) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    out.push_back(std::atoi(s.substr(pos, comma - pos).c_str()));
    pos = comma + 1;
  }
  return out;
}

bool HaveGpu() {
#ifdef TANDEM_HAVE_CUDA
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
#else
  return false;
#endif
}

int StoreBench(const std::vector<std::string>& args) {
  uint64_t bytes = 256, ops = 1'000'000;
  std::string threads_arg = "1,4,16";
  for (size_t i = 0; i + 1 < args.size(); i += 2) {
    if (args[i] == "--bytes") bytes = std::strtoull(args[i + 1].c_str(), nullptr, 10);
    else if (args[i] == "--ops") ops = std::strtoull(args[i + 1].c_str(), nullptr, 10);
    else if (args[i] == "--threads") threads_arg = args[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s; flags: --bytes N --ops N --threads 1,4,16\n",
                   args[i].c_str());
      return 2;
    }
  }
  StoreOptions options;
  options.name = "bench";
  options.capacity_bytes = uint64_t{64} << 20;
  Result<std::unique_ptr<ObjectStore>> opened = ObjectStore::Open(options);
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.status().ToString().c_str());
    return 1;
  }
  ObjectStore& store = **opened;
  const bool gpu = HaveGpu();
  std::printf("object %llu B, %llu ops/thread, arena %s %s\n",
              static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(ops),
              FormatBytes(store.arena().size()).c_str(),
              std::string(ArenaKindName(store.arena().kind())).c_str());
  std::printf("%7s | %-22s %12s %9s %9s | %9s\n", "threads", "path", "ops/s", "p50 us",
              "p99 us", "store/row");

  bool goals_met = true;
  for (int threads : ParseThreads(threads_arg)) {
    RunResult st = Run(threads, ops, [&](int, bool sample) -> double {
      const double t0 = sample ? NowNs() : 0;
      Result<MutableObject> obj = store.Create(bytes, "bench");
      const double t1 = sample ? NowNs() : 0;
      if (!obj.ok()) return -1;
      std::memset(obj->data(), 0x5A, bytes);
      ObjectRef ref = obj->Seal();
      return t1 - t0;
    });
    RunResult ma = Run(threads, ops, [&](int, bool sample) -> double {
      const double t0 = sample ? NowNs() : 0;
      void* p = std::malloc(bytes);
      const double t1 = sample ? NowNs() : 0;
      if (p == nullptr) return -1;
      std::memset(p, 0x5A, bytes);
      asm volatile("" : : "r"(p) : "memory");  // keep the write and the free
      std::free(p);
      return t1 - t0;
    });
    auto row = [&](const char* path, const RunResult& r, bool self) {
      std::printf("%7d | %-22s %12.0f %9.3f %9.3f | %9s\n", threads, path, r.ops_per_s,
                  r.p50_ns / 1e3, r.p99_ns / 1e3,
                  self ? "1.00"
                       : fmt::format("{:.2f}", st.ops_per_s / r.ops_per_s).c_str());
    };
    row("store put+seal+release", st, true);
    row("malloc+free", ma, false);
#ifdef TANDEM_HAVE_CUDA
    if (gpu) {
      RunResult ch = Run(threads, std::max<uint64_t>(ops / 500, 100), [&](int, bool) -> double {
        const double t0 = NowNs();
        void* p = nullptr;
        if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) return -1;
        const double t1 = NowNs();
        std::memset(p, 0x5A, bytes);
        cudaFreeHost(p);
        return t1 - t0;
      });
      row("cudaHostAlloc+FreeHost", ch, false);
      if (!ch.ok) std::printf("  cudaHostAlloc failed during the run\n");
    }
#endif
    if (!st.ok) std::printf("  store Create failed during the run\n");
    if (threads == 1) {
      const bool tput = st.ops_per_s >= 1e6, lat = st.p99_ns < 10e3;
      std::printf("  goal 1 thread >= 1M put+release/s: %s; p99 alloc < 10 us: %s\n",
                  tput ? "met" : "MISSED", lat ? "met" : "MISSED");
      goals_met = goals_met && tput && lat && st.ok;
    }
  }
  if (!gpu) std::printf("(no GPU visible: cudaHostAlloc/cudaFreeHost rows skipped)\n");
  StoreStats s = store.Stats();
  std::printf("store after run: %llu creates, %llu frees, high-water %s, %llu live\n",
              static_cast<unsigned long long>(s.creates),
              static_cast<unsigned long long>(s.frees), FormatBytes(s.high_water).c_str(),
              static_cast<unsigned long long>(s.live_objects));
  return goals_met ? 0 : 1;
}

}  // namespace

TANDEM_BENCH("store", "store", "ObjectStore put+seal+release and alloc latency vs malloc",
             StoreBench);

}  // namespace tandem::bench
