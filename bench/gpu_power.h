// Power and SM clock of a CUDA device while a benchmark runs, read through NVML. A training
// step on an H200 draws the board's power limit and the SM clock drops well below its
// maximum, so the clock a timed region ran at explains the gap between kernels timed alone
// (short bursts at full clock) and the same kernels inside a step. NVML comes with the
// driver: the library is opened at run time (libnvidia-ml.so.1), so a machine without a
// driver gets an Unavailable error instead of a binary that fails to start.
//
// Thread-safety: a sampler owns one background thread; Stop() may be called from one other
// thread, once.
#pragma once

#include <memory>
#include <string>

#include "runtime/core/status.h"

namespace tandem::bench {

struct PowerSummary {
  int samples = 0;
  double mean_watts = 0, max_watts = 0, limit_watts = 0;
  double mean_sm_mhz = 0, min_sm_mhz = 0, max_sm_mhz_supported = 0;
  // "power 695 W (max 702) of a 700 W limit; SM clock 1560 MHz (1455..1980 max)".
  std::string ToString() const;
};

class PowerSampler {
 public:
  // Starts sampling CUDA device `cuda_device` (matched to NVML by PCI bus id) every
  // `interval_ms`. Unavailable when NVML cannot be opened or does not know the device.
  static Result<std::unique_ptr<PowerSampler>> Start(int cuda_device, int interval_ms = 20);
  ~PowerSampler();
  PowerSampler(const PowerSampler&) = delete;
  PowerSampler& operator=(const PowerSampler&) = delete;

  // Stops the thread and summarises the samples taken since Start.
  PowerSummary Stop();

  struct Impl;

 private:
  explicit PowerSampler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::bench
