// The bottleneck verdict for actors that share a GPU (BottleneckVerdict's first check).
//
// Host-side timings mislead there: an actor that queues GPU work asynchronously (the
// drafter runs steps ahead of its GPU) looks idle on the host, and a stage timed with CUDA
// events on one actor's stream also counts the other actor's kernels that the GPU
// interleaved with it. What does hold is when a stream is *idle*: an actor whose GPU work
// leaves gaps is waiting for something, and the one whose stream is busy all the time bounds.
//
// What it cannot say: how the GPU's time divides between the sides. Busy shares overlap
// (while both streams have work, each side's events also count the other's kernels), so a
// side that never waits may still take the smaller part of the GPU; per-kernel times
// (CUPTI) would be needed for the split. `tandem-bench pipeline` measures it standalone.
//
// GPU-busy stages are named `<prefix>.gpu.<what>` (e.g. `target.gpu.forward`,
// `drafter.gpu.step`): the time, by CUDA events, an actor's compute stream spent on that
// work. `prefix` names the actors: the group of that name, else the groups whose class
// ends in "." + prefix (class dflash.target for prefix target). A side's busy share is its
// GPU-busy seconds over the job's seconds times its replicas (a replica-mean).
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/job/job_status.h"

namespace tandem {

// A side is saturated when its stream is busy at least this share of the time.
inline constexpr double kGpuSaturated = 0.8;

struct GpuSideShare {
  std::string prefix;   // stage prefix, e.g. "drafter"
  int replicas = 0;     // actors of that side
  double busy = 0;      // GPU-busy share of its replicas' time, in [0, 1]
};

// The sides with GPU-busy stages that have an actor on GPU `gpu`, busiest first.
std::vector<GpuSideShare> GpuSharesOn(const JobStatus& job, int gpu);

// For the first GPU shared by two or more sides with GPU-busy stages, whose busiest side is
// saturated: which side bounds and how long the others' GPU work idles, or that the GPU
// bounds them all. nullopt when no GPU is shared that way (the channel verdict applies).
std::optional<std::string> SharedGpuVerdict(const JobStatus& job, double wait_threshold);

// True for a GPU-busy stage name (a ".gpu." component after the prefix).
bool IsGpuBusyStage(const std::string& name);

}  // namespace tandem
