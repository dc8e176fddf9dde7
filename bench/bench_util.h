// What the tandem-bench families share: running a PyTorch peer script and reading the
// JSON object it prints, CUDA-event timing, device buffer fills and the cuBLAS bf16 GEMM
// ceiling that MFU numbers are measured against.
// Thread-safety: the functions keep no state; the CUDA ones use the calling thread's current
// device (0 in every bench) and may run concurrently only on distinct buffers.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/core/status.h"

#ifdef TANDEM_HAVE_CUDA
#include "kernels/core/memory.h"
#include "kernels/core/stream.h"
#endif

namespace tandem::bench {

// Runs `python3 SCRIPT ARGS` when python3 can `import MODULES` (e.g. "torch, transformers")
// and torch sees a CUDA device, echoing the command. SCRIPT is the peer's path in the source
// tree the bench was built from; where that tree is absent (the binary copied to a GPU host
// with a checkout elsewhere), bench/NAME under $TANDEM_SOURCE_DIR, else under the current
// directory, is run instead. Returns the JSON object on the last
// stdout line that starts with '{' (the peers print one such line last), or an empty json
// when the peer is unavailable, exits non-zero or prints no JSON; each case says so on stdout.
nlohmann::json RunPeer(const std::string& script, const std::string& args,
                       const std::string& modules);

// peer[key] as a double, 0 when the peer gave no such number.
double PeerNumber(const nlohmann::json& peer, const std::string& key);

// A GPU-only bench section `name`: prints "NAME: skipped (...)" and returns 0 where tandem was
// built without CUDA (`run` may then be empty) or sees no CUDA device; else calls `run` and
// returns 1, printing "NAME bench: ERROR" to stderr, if it fails, 0 if not.
int RunGpuSection(const char* name, const std::function<Status()>& run);

#ifdef TANDEM_HAVE_CUDA
// Mean milliseconds per call of `fn` over `iters` calls after `warmup` untimed calls, timed
// with CUDA events recorded on `stream` (nullptr: the legacy default stream) on device 0.
// Returns the first error a call or the event API returns.
Result<double> TimeMs(kernels::Stream stream, int iters, int warmup,
                      const std::function<Status()>& fn);

// Fills `n` bf16 elements at device pointer `p` with small deterministic values (a cheap
// hash of the index and `seed`; finite, |x| < 0.5), uploading from a host staging buffer.
void FillBf16(void* p, int64_t n, uint32_t seed);

// A bf16 tensor of `shape` from `allocator`, uniform in [-scale, scale) from Philox stream
// `seed` (drawn in f32 on the device, then cast), enqueued on `stream`.
Result<kernels::Tensor> RandomBf16(kernels::Allocator& allocator, kernels::Shape shape,
                                   float scale, uint64_t seed, kernels::Stream stream);

// cuBLAS bf16 GEMM rate in TFLOP/s at 8192^3 with fp32 accumulation on `stream` (inputs
// filled by FillBf16), mean over `iters` back-to-back GEMMs: the ceiling that GEMM and MFU
// figures are compared with. The default 20 (~30 ms on an H200) is a burst at full clock;
// ~1500 (~2 s) runs long enough to hit the board's power limit, as a training step does.
Result<double> GemmCeilingTflops(kernels::Stream stream, int iters = 20);
#endif

}  // namespace tandem::bench
