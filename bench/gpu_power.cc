// NVML through dlopen: the few entry points used here are declared with NVML's documented
// C signatures (nvmlReturn_t is an int enum, nvmlDevice_t an opaque pointer), so building
// needs neither nvml.h nor the driver.
#include "bench/gpu_power.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace tandem::bench {
namespace {

using NvmlDevice = struct NvmlDeviceOpaque*;
using NvmlReturn = int;         // NVML_SUCCESS == 0
constexpr unsigned kNvmlClockSm = 1;  // nvmlClockType_t NVML_CLOCK_SM

struct Nvml {
  void* lib = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*by_pci)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*power_mw)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*limit_mw)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*clock)(NvmlDevice, unsigned, unsigned*) = nullptr;
  NvmlReturn (*max_clock)(NvmlDevice, unsigned, unsigned*) = nullptr;

  ~Nvml() {
    if (shutdown != nullptr) shutdown();
    if (lib != nullptr) dlclose(lib);
  }
};

template <typename F>
bool Bind(void* lib, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  return *fn != nullptr;
}

struct Sample {
  double watts, sm_mhz;
};

}  // namespace

struct PowerSampler::Impl {
  Nvml nvml;
  NvmlDevice device = nullptr;
  double limit_watts = 0, max_sm_mhz = 0;
  int interval_ms = 20;
  std::atomic<bool> stop{false};
  std::vector<Sample> samples;  // written by `thread` only, read after it joins
  std::thread thread;

  void Run() {
    while (!stop.load(std::memory_order_relaxed)) {
      unsigned mw = 0, mhz = 0;
      if (nvml.power_mw(device, &mw) == 0 && nvml.clock(device, kNvmlClockSm, &mhz) == 0)
        samples.push_back({mw / 1000.0, static_cast<double>(mhz)});
      std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
    }
  }
};

std::string PowerSummary::ToString() const {
  if (samples == 0) return "power: no samples";
  return fmt::format(
      "power {:.0f} W (max {:.0f}) of a {:.0f} W limit; SM clock {:.0f} MHz (min {:.0f}, "
      "device max {:.0f}); {} samples",
      mean_watts, max_watts, limit_watts, mean_sm_mhz, min_sm_mhz, max_sm_mhz_supported, samples);
}

PowerSampler::PowerSampler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PowerSampler::~PowerSampler() {
  if (impl_ && impl_->thread.joinable()) Stop();
}

Result<std::unique_ptr<PowerSampler>> PowerSampler::Start(int cuda_device, int interval_ms) {
  auto impl = std::make_unique<Impl>();
  Nvml& n = impl->nvml;
  n.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (n.lib == nullptr)
    return UnavailableError("power sampling: cannot open libnvidia-ml.so.1 (NVML, part of the "
                            "NVIDIA driver): {}", dlerror());
  NvmlReturn (*init)() = nullptr;
  if (!Bind(n.lib, "nvmlInit_v2", &init) || !Bind(n.lib, "nvmlShutdown", &n.shutdown) ||
      !Bind(n.lib, "nvmlDeviceGetHandleByPciBusId_v2", &n.by_pci) ||
      !Bind(n.lib, "nvmlDeviceGetPowerUsage", &n.power_mw) ||
      !Bind(n.lib, "nvmlDeviceGetEnforcedPowerLimit", &n.limit_mw) ||
      !Bind(n.lib, "nvmlDeviceGetClockInfo", &n.clock) ||
      !Bind(n.lib, "nvmlDeviceGetMaxClockInfo", &n.max_clock)) {
    n.shutdown = nullptr;
    return UnavailableError("power sampling: libnvidia-ml.so.1 lacks an NVML entry point");
  }
  if (NvmlReturn r = init(); r != 0) {
    n.shutdown = nullptr;
    return UnavailableError("power sampling: nvmlInit_v2 returned {}", r);
  }
  char bus[32] = {};
  if (cudaError_t e = cudaDeviceGetPCIBusId(bus, sizeof(bus), cuda_device); e != cudaSuccess)
    return UnavailableError("power sampling: no PCI bus id for cuda:{}: {}", cuda_device,
                            cudaGetErrorString(e));
  if (NvmlReturn r = n.by_pci(bus, &impl->device); r != 0)
    return UnavailableError("power sampling: NVML has no device at PCI {} (cuda:{}): error {}",
                            bus, cuda_device, r);
  unsigned limit_mw = 0, max_mhz = 0;
  if (n.limit_mw(impl->device, &limit_mw) == 0) impl->limit_watts = limit_mw / 1000.0;
  if (n.max_clock(impl->device, kNvmlClockSm, &max_mhz) == 0) impl->max_sm_mhz = max_mhz;
  impl->interval_ms = std::max(1, interval_ms);
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<PowerSampler>(new PowerSampler(std::move(impl)));
}

PowerSummary PowerSampler::Stop() {
  impl_->stop.store(true, std::memory_order_relaxed);
  if (impl_->thread.joinable()) impl_->thread.join();
  PowerSummary s;
  s.limit_watts = impl_->limit_watts;
  s.max_sm_mhz_supported = impl_->max_sm_mhz;
  const std::vector<Sample>& v = impl_->samples;
  s.samples = static_cast<int>(v.size());
  if (v.empty()) return s;
  s.min_sm_mhz = v[0].sm_mhz;
  for (const Sample& x : v) {
    s.mean_watts += x.watts / v.size();
    s.mean_sm_mhz += x.sm_mhz / v.size();
    s.max_watts = std::max(s.max_watts, x.watts);
    s.min_sm_mhz = std::min(s.min_sm_mhz, x.sm_mhz);
  }
  return s;
}

}  // namespace tandem::bench
