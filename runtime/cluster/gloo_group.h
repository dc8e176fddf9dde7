// GlooGroup: CPU collectives between the processes of a cluster over Gloo's TCP transport,
// bootstrapped through the cluster head's key-value service.
//
// Each member creates the group with the same name, its rank and the size. Gloo's
// rendezvous (every rank publishes its listening address, then connects to every other)
// goes through ClusterNode::KvPut/KvGet under the key prefix "gloo/NAME/", so groups of
// different names never mix. `address` is the interface the member listens on (its node's
// address; 127.0.0.1 in tests).
//
// AverageInRankOrder gives bit-identical results to the in-process gradient average: each
// rank receives every rank's copy of its own slice (alltoallv), averages it with
// slice_average.h's arithmetic, and then every rank gathers all slices (allgatherv).
// Every collective has the group's timeout; a peer that died or stalled makes it fail with
// Unavailable (Gloo's exceptions are converted here) and the group must not be used again.
//
// Thread-safety: one thread at a time per group (the collectives are ordered by call).
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
  // `timeout`). `node` must outlive the call (the group does not keep it).
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

  class Impl;

 private:
  GlooGroup(int rank, int size, std::unique_ptr<Impl> impl);
  int rank_, size_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::cluster
