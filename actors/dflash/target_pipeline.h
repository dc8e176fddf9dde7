// TargetPipeline: the target's per-batch work after the data source: forward with captures,
// the captured layers into store objects, HiddenBatch into the channel. On the CPU all of it
// runs inline (the forward writes straight into the objects). On CUDA (two capture sets) the
// forward of batch n+1 is enqueued while a postprocess stream copies batch n's layers into
// its objects and a postprocess thread waits for those copies' fences, seals and pushes.
// Profile stages: target.forward, target.pack, target.d2h, target.push_wait.
//
// `producer` is the target's producer index on the channel (JobSpec::PortIndex).
//
// Thread-safety: Submit/Finish from the actor's thread only.
#pragma once

#include <memory>
#include <string>

#include "actors/dflash/hidden_batch.h"
#include "actors/dflash/target_model.h"
#include "runtime/job/job_actor.h"

namespace tandem::dflash {

class TargetPipeline {
 public:
  static Result<std::unique_ptr<TargetPipeline>> Create(SharedTarget* target,
                                                        const TargetModelSpec& spec,
                                                        JobEnv* env,
                                                        Channel<HiddenBatch>* out,
                                                        int producer, std::string owner);
  virtual ~TargetPipeline() = default;
  // Starts `batch` through the pipeline; `next` is the source's position after it.
  virtual Status Submit(data::TokenBatch batch, data::DataPosition next, int replica) = 0;
  // Waits until every submitted batch is pushed (or returns the first error).
  virtual Status Finish() = 0;
};

}  // namespace tandem::dflash
