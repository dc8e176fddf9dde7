// Private to target_pipeline.cc (the TargetPipeline factory and the CPU pipeline) and
// target_pipeline_cuda.cc (the CUDA pipeline): what each defines for the other.
//
// Thread-safety: as target_pipeline.h.
#pragma once

#include <memory>
#include <string>

#include "actors/dflash/target_pipeline.h"

namespace tandem::dflash::internal {

// The HiddenBatch shell of `batch` (metadata, its checksum, where it came from: target
// replica `replica`, producer `writer` on the channel), without layers: both pipelines fill
// those in.
HiddenBatch MakeShell(data::TokenBatch batch, data::DataPosition next, int replica, int writer,
                      const TargetModelSpec& spec);

// The CUDA pipeline on the target's device (Unavailable in a build without CUDA).
Result<std::unique_ptr<TargetPipeline>> MakeCudaPipeline(SharedTarget* target,
                                                         const TargetModelSpec& spec,
                                                         JobEnv* env, Channel<HiddenBatch>* out,
                                                         int producer, std::string owner);

}  // namespace tandem::dflash::internal
