// Fixed properties of CUDA devices that launchers size their grids with. Free of Status and
// fmt so .cu files can include it.
//
// Thread-safety: safe from any thread. Each device is queried once; the answer (a property
// of the hardware, not state) is kept per device index.
#pragma once

namespace tandem::kernels {

// Streaming multiprocessors of CUDA device `device` (1 if it cannot be queried, or without
// CUDA: a launch on a broken device reports its own error).
int DeviceSmCount(int device);
// The same for the calling thread's current device.
int CurrentDeviceSmCount();

// Compute capability major of CUDA device `device` (9 on Hopper), 0 if it cannot be queried or
// without CUDA. Launchers choose architecture-specific kernels (wgmma needs 9) with it.
int DeviceComputeCapabilityMajor(int device);
// The same for the calling thread's current device.
int CurrentDeviceComputeCapabilityMajor();

}  // namespace tandem::kernels
