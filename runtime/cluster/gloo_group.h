// GlooGroup: CPU collectives between the processes of a cluster over Gloo's TCP transport,
// bootstrapped through the cluster head's key-value service.
//
// Each member creates the group with the same name, its rank and the size. Gloo's
// rendezvous (every rank publishes its listening address, then connects to every other)
// goes through ClusterNode::KvPut/KvGet under the key prefix "gloo/NAME/", so groups of
// different names never mix. `address` is the interface the member listens on (its node's
// address; 127.0.0.1 in tests).
//
// The collectives are point-to-point messages on Gloo's unbound buffers, one slot per call.
// AverageInRankOrder gives bit-identical results to the in-process gradient average: each
// rank receives every rank's copy of its own slice, averages it with slice_average.h's
// arithmetic, and then sends its averaged slice to every rank.
//
// Failures: every wait has the group's timeout; a peer that died makes the wait fail at once
// (its connection closes), one that stalls (SIGSTOP, a hung host) only at the timeout. So the
// group also watches the cluster: when the node's heartbeats learn that the cluster failed
// (ClusterNode::failure(), within the job's node timeout), or when Abort is called, every
// wait in progress returns at once with Unavailable carrying that reason (the node and its
// last step), and so does every later call. A wait that fails on its own (a peer's connection
// closed) first waits up to the node timeout for that verdict, so its error names the lost
// node too. A failed or aborted group must not be used again.
//
// Thread-safety: one thread at a time per group for the collectives (they are ordered by
// call); Abort from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/cluster/cluster_node.h"
#include "runtime/core/clock.h"
#include "runtime/core/status.h"

namespace tandem::cluster {

class GlooGroup {
 public:
  // Joins rank `rank` of `size` of group `name`; blocks until every member connected (or
  // `timeout`, which is also each later wait's bound). `node` must outlive the group (its
  // failure() is watched).
  static Result<std::unique_ptr<GlooGroup>> Create(ClusterNode* node, const std::string& name,
                                                   int rank, int size,
                                                   const std::string& address,
                                                   Duration timeout);
  ~GlooGroup();
  GlooGroup(const GlooGroup&) = delete;
  GlooGroup& operator=(const GlooGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // data[0, n) <- the average over all ranks of their data, bitwise as the in-process path
  // (slice_average.h). Every rank calls it with the same n.
  Status AverageInRankOrder(float* data, int64_t n);
  // bytes of root's data to every rank's data.
  Status Broadcast(void* data, size_t bytes, int root);
  // out[r * bytes, (r+1) * bytes) <- rank r's `in`; out holds size() * bytes.
  Status AllGather(const void* in, size_t bytes, void* out);
  Status Barrier();
  // Ends the collective in progress (and every later one) with Unavailable carrying `why`.
  // Idempotent: the first reason stays.
  void Abort(const Status& why);

  class Impl;

 private:
  GlooGroup(int rank, int size, std::unique_ptr<Impl> impl);
  int rank_, size_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::cluster
