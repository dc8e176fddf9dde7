// GradientAllReduce: averages the drafter's flat fp32 gradient buffer across the replicas of
// one dflash.drafter group (data parallelism), between backward and the optimizer step, so
// that every replica applies the same update and keeps the same weights.
//
// The replicas of a group are threads of one process; they meet in a rendezvous of their
// job's JobRegistry, keyed by group name, that lives only while some replica holds it.
//   CPU replicas: an in-process all-reduce. Each step the replicas meet on a barrier, each
//     averages its own slice of the elements over all replicas in rank order (0, 1, ...)
//     into a shared buffer, meet again, and copy the whole average back: every replica gets
//     bit-identical gradients, and the same ones run after run.
//   CUDA replicas: NCCL. The unique id is made once per rendezvous and shared in memory;
//     each replica joins its communicator on its own GPU, and each step enqueues one
//     ncclAllReduce(avg) of the buffer on the compute stream (no host sync). NCCL refuses two
//     ranks on one GPU, so CUDA replicas need distinct GPUs.
// Both paths meet on a host barrier every step (the NCCL path only to notice departures; it
// does not wait for the device), so when a replica leaves (its channel closed early, an
// error, the end of its run) every replica that is waiting or arrives later gets a
// Unavailable error naming who left, at which step and why, instead of hanging. The job
// then fails: replicas never silently stop at different steps.
//
// Across processes (one tandem process per node, runtime/cluster), JoinGradientAllReduceAcross
// Nodes gives the same interface with the ranks in several processes: CPU replicas average
// through a cluster::GlooGroup (bit-identical to the in-process path: one shared function,
// runtime/cluster/slice_average.h); CUDA replicas use a non-blocking NCCL communicator whose
// unique id rank 0 publishes through the cluster head's key-value service, and a watchdog
// aborts it when NCCL reports an error or the cluster fails, so no rank hangs on a dead peer.
//
// Thread-safety: one GradientAllReduce per replica, used by that replica's thread only;
// the rendezvous behind it is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/core/tensor.h"
#include "runtime/core/clock.h"
#include "runtime/core/status.h"
#include "runtime/job/job_registry.h"

namespace tandem::cluster {
class ClusterNode;
}  // namespace tandem::cluster

namespace tandem::dflash {

class GradientAllReduce {
 public:
  virtual ~GradientAllReduce() = default;
  int rank() const { return rank_; }
  int size() const { return size_; }

  // Replaces grads (f32 [N], contiguous, on this replica's device) with the average over
  // all replicas, ordered on `stream`. Every replica calls it once per step with the same N.
  virtual Status AllReduceAvg(const kernels::TensorView& grads, kernels::Stream stream) = 0;
  // Leaves the group for good: replicas waiting now or later get an error carrying `why`.
  // Also done (with "it finished") by the destructor.
  virtual void Leave(const std::string& why) = 0;

 protected:
  GradientAllReduce(int rank, int size) : rank_(rank), size_(size) {}

 private:
  int rank_, size_;
};

// Joins rank `rank` of `nranks` of the rendezvous of `group` in the job of `registry`. `device` says which
// implementation: CPU or NCCL on that CUDA device. Blocks until all ranks joined (NCCL)
// or returns at once (CPU). Fails if the rendezvous was already left by some replica.
Result<std::unique_ptr<GradientAllReduce>> JoinGradientAllReduce(JobRegistry& registry,
                                                                 const std::string& group,
                                                                 int nranks, int rank,
                                                                 kernels::Device device);

// Joins global rank `rank` of `nranks` of `group` across the cluster's processes (see the
// header comment). `node` is this process's joined cluster client and must outlive the
// result; `address` is the interface Gloo listens on (this node's address). Blocks until
// every rank connected or `timeout`. Each group joins once per run (the NCCL id and the
// Gloo rendezvous live under the group's name in the head's key-value service).
Result<std::unique_ptr<GradientAllReduce>> JoinGradientAllReduceAcrossNodes(
    cluster::ClusterNode& node, const std::string& group, int nranks, int rank,
    kernels::Device device, const std::string& address, Duration timeout);

}  // namespace tandem::dflash
