#include "runtime/sched/resources.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string_view>
#include <thread>

#include "runtime/core/clock.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tandem::sched {
namespace {

Result<int64_t> ParseNonNegative(const char* var, std::string_view text) {
  int64_t v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0) {
    return InvalidArgumentError("{}='{}' is not a non-negative integer", var, text);
  }
  return v;
}

uint64_t HalfPhysicalMemory() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2;
}

Result<std::vector<GpuInfo>> CudaGpus() {
  std::vector<GpuInfo> gpus;
#ifdef TANDEM_HAVE_CUDA
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
    cudaGetLastError();  // clear the sticky "no device" error
    return gpus;
  }
  if (err != cudaSuccess) {
    return CudaError("cudaGetDeviceCount: {}", cudaGetErrorString(err));
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    err = cudaGetDeviceProperties(&prop, i);
    if (err != cudaSuccess) {
      return CudaError("cudaGetDeviceProperties({}): {}", i, cudaGetErrorString(err));
    }
    gpus.push_back(GpuInfo{i, prop.name, static_cast<uint64_t>(prop.totalGlobalMem), false,
                           prop.major * 10 + prop.minor});
  }
#endif
  return gpus;
}

}  // namespace

std::string NodeResources::ToString() const {
  std::string g;
  for (size_t i = 0; i < gpus.size();) {
    size_t j = i;
    while (j < gpus.size() && gpus[j].name == gpus[i].name &&
           gpus[j].memory_bytes == gpus[i].memory_bytes) {
      ++j;
    }
    if (!g.empty()) g += ", ";
    g += fmt::format("{} {} ×{}", gpus[i].name, FormatBytes(gpus[i].memory_bytes), j - i);
    i = j;
  }
  return fmt::format("{} GPU{}{}, {} CPU slots, {} pinned", gpus.size(),
                     gpus.size() == 1 ? "" : "s", g.empty() ? "" : " (" + g + ")", cpu_slots,
                     FormatBytes(pinned_bytes));
}

NodeResources FakeResources(int count, int cpu_slots, uint64_t pinned_bytes,
                            uint64_t memory_bytes) {
  NodeResources r;
  for (int i = 0; i < count; ++i) r.gpus.push_back(GpuInfo{i, "fake-gpu", memory_bytes, true});
  r.cpu_slots = cpu_slots;
  r.pinned_bytes = pinned_bytes;
  return r;
}

Result<NodeResources> DiscoverResources() {
  NodeResources r;
  r.cpu_slots = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  r.pinned_bytes = HalfPhysicalMemory();
  if (const char* v = std::getenv("TANDEM_PINNED_BYTES"); v != nullptr && *v != '\0') {
    ASSIGN_OR_RETURN(int64_t bytes, ParseNonNegative("TANDEM_PINNED_BYTES", v));
    r.pinned_bytes = static_cast<uint64_t>(bytes);
  }
  if (const char* v = std::getenv("TANDEM_FAKE_GPUS"); v != nullptr && *v != '\0') {
    ASSIGN_OR_RETURN(int64_t n, ParseNonNegative("TANDEM_FAKE_GPUS", v));
    NodeResources fake = FakeResources(static_cast<int>(n), r.cpu_slots, r.pinned_bytes);
    return fake;
  }
  ASSIGN_OR_RETURN(r.gpus, CudaGpus());
  return r;
}

}  // namespace tandem::sched
